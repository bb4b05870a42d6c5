//! Cluster-scoped objects a test creates (PersistentVolumes, StorageClasses). Deleting the
//! test's namespace does not remove them, so a guard deletes them when it drops, also when an
//! assertion failed.

use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::DeleteParams;
use kube::Api;

use crate::cluster::{client_from_kubeconfig, kubeconfig_path};

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
        // On a thread with a runtime and a client of its own: the test's runtime may be the
        // one this drop blocks, and a client is served by the runtime that made it.
        let worker = std::thread::spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => return eprintln!("no runtime to delete {pvs:?} and {classes:?}: {e}"),
            };
            rt.block_on(async move {
                let client = match client_from_kubeconfig(&kubeconfig_path()).await {
                    Ok(c) => c,
                    Err(e) => {
                        return eprintln!("cannot connect to delete {pvs:?}, {classes:?}: {e:#}")
                    }
                };
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
        });
        let _ = worker.join();
    }
}
