//! Cluster-scoped objects a test creates (PersistentVolumes, StorageClasses). Deleting the
//! test's namespace does not remove them, so a guard deletes them when it drops, also when an
//! assertion failed.

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::DeleteParams;
use kube::Api;

use crate::cluster::cleanup_with_own_client;

/// Names of PersistentVolumes and StorageClasses to delete when the guard drops. The volumes
/// go first: a class is only a name to them, but deleting them before it keeps the order a
/// reader expects.
#[derive(Debug, Default)]
pub struct ClusterScoped {
    pvs: Vec<String>,
    classes: Vec<String>,
}

impl ClusterScoped {
    /// A guard for one StorageClass (volumes are added with [`ClusterScoped::pv`]).
    pub fn class(name: impl Into<String>) -> Self {
        Self {
            pvs: vec![],
            classes: vec![name.into()],
        }
    }

    /// Delete this PersistentVolume too when the guard drops.
    pub fn pv(&mut self, name: impl Into<String>) {
        self.pvs.push(name.into());
    }
}

impl Drop for ClusterScoped {
    fn drop(&mut self) {
        let (pvs, classes) = (
            std::mem::take(&mut self.pvs),
            std::mem::take(&mut self.classes),
        );
        let what = format!("PersistentVolumes {pvs:?}, StorageClasses {classes:?}");
        cleanup_with_own_client(what, move |client| async move {
            let dp = DeleteParams::default();
            for pv in &pvs {
                if let Err(e) = Api::<PersistentVolume>::all(client.clone())
                    .delete(pv, &dp)
                    .await
                {
                    eprintln!("deleting PersistentVolume {pv}: {e}");
                }
            }
            for class in &classes {
                if let Err(e) = Api::<StorageClass>::all(client.clone())
                    .delete(class, &dp)
                    .await
                {
                    eprintln!("deleting StorageClass {class}: {e}");
                }
            }
        });
    }
}
