//! Creating and deleting the objects a run owns without ever touching another's: names are
//! fixed, so a run deleted and applied again before garbage collection removed the first one's
//! objects would otherwise take them over (a workload of the old spec, a result object with the
//! old results), and its cleanup would delete what a user kept (`kubectl delete --cascade=orphan`
//! to keep the data, then the same run applied again).
//!
//! Every create of a fixed-name object goes through [`create_if_absent`], every delete through
//! [`delete_if_ours`] or [`delete_exact`]: none deletes by name alone, each names the UID it
//! deletes as a precondition, so an object replaced under the name meanwhile is left alone.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::{Api, Resource, ResourceExt};

use crate::crd::BenchmarkRun;
use crate::{Error, Result};

/// Create `obj` for `run`; one that exists already is fine if it is the run's (returns whether
/// it was created).
pub(crate) async fn create_if_absent<K>(api: &Api<K>, obj: &K, run: &BenchmarkRun) -> Result<bool>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    if create_unique(api, obj).await? {
        return Ok(true);
    }
    let what = format!("{} {}", K::kind(&Default::default()), obj.name_any());
    let Some(existing) = api.get_opt(&obj.name_any()).await? else {
        // Deleted in between: created on the next pass.
        return Err(Error::Invalid(format!("{what} was deleted meanwhile")));
    };
    ours(run, existing.owner_references(), what)?;
    Ok(false)
}

/// Create `obj`: whether it was created (false: the name is taken). Alone, for objects whose
/// names carry their run's UID (objects the operator may create but not read: the token
/// Secret, the NetworkPolicy), so one that exists is the run's.
pub(crate) async fn create_unique<K>(api: &Api<K>, obj: &K) -> Result<bool>
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        // The API server refused the object itself (a field of the run it was built from, a
        // quota): retrying cannot help, the run must say so. Timeouts (408) and throttling
        // (429) are retried.
        Err(kube::Error::Api(e))
            if (400..500).contains(&e.code) && e.code != 408 && e.code != 429 =>
        {
            Err(Error::Rejected {
                what: format!("{} {}", K::kind(&Default::default()), obj.name_any()),
                message: e.message,
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// What became of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deleted {
    /// Deleted (or being deleted).
    Yes,
    /// There was nothing of that name.
    Absent,
    /// An object of that name exists and is not the run's: left alone.
    NotOurs,
}

/// Delete `name` if it is `run`'s (owned by this run's UID): read, then deleted with the UID
/// read as a precondition, so neither an object of the same name that is another's (a user's
/// claim, an earlier run's pod) nor one re-created under the name in between is touched.
pub(crate) async fn delete_if_ours<K>(
    api: &Api<K>,
    name: &str,
    run: &BenchmarkRun,
    dp: DeleteParams,
) -> Result<Deleted>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(existing) = api.get_opt(name).await? else {
        return Ok(Deleted::Absent);
    };
    let (Some(uid), true) = (
        existing.meta().uid.clone(),
        owned_by(run, existing.owner_references()),
    ) else {
        return Ok(Deleted::NotOurs);
    };
    delete_exact(api, name, &uid, dp).await
}

/// Delete the object `name` whose UID is `uid`, and no other: the only delete the operator
/// makes. An object of that name with another UID (409 Conflict on the precondition) is
/// [`Deleted::NotOurs`].
pub(crate) async fn delete_exact<K>(
    api: &Api<K>,
    name: &str,
    uid: &str,
    dp: DeleteParams,
) -> Result<Deleted>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &with_uid(dp, uid)).await {
        Ok(_) => Ok(Deleted::Yes),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Deleted::Absent),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Deleted::NotOurs),
        Err(e) => Err(e.into()),
    }
}

/// `dp` with a precondition on the UID.
fn with_uid(dp: DeleteParams, uid: &str) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        ..dp
    }
}

/// Whether an object with these owners is `run`'s (this incarnation of it: its UID).
pub(crate) fn owned_by(run: &BenchmarkRun, owners: &[OwnerReference]) -> bool {
    run.metadata
        .uid
        .as_ref()
        .is_some_and(|uid| owners.iter().any(|o| &o.uid == uid))
}

/// Whether an object with these owners is `run`'s; an error that says whose it is if not.
pub(crate) fn ours(run: &BenchmarkRun, owners: &[OwnerReference], what: String) -> Result<()> {
    if owned_by(run, owners) {
        return Ok(());
    }
    let earlier = owners
        .iter()
        .find(|o| o.kind == "BenchmarkRun" && o.name == run.name_any());
    let owner = match (earlier, owners.first()) {
        (Some(o), _) => format!(
            "it is the earlier run {}'s (uid {}), which Kubernetes is deleting",
            o.name, o.uid
        ),
        (None, Some(o)) => format!("it is owned by {} {}", o.kind, o.name),
        (None, None) => "it has no owner".into(),
    };
    Err(Error::NotOurs {
        what,
        owner,
        earlier_run: earlier.is_some(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(uid: Option<&str>) -> BenchmarkRun {
        let mut r: BenchmarkRun = serde_json::from_value(serde_json::json!({
            "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": "bench", "namespace": "ns"},
            "spec": {"workload": {"target": "s3://b/p/", "duration": "5s", "ops": [{"op": "get"}],
                     "dataset": {"objects": 1, "size": "1KiB"}}}
        }))
        .expect("run");
        r.metadata.uid = uid.map(str::to_string);
        r
    }

    fn owner(kind: &str, name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_this_incarnations_uid_makes_an_object_ours() {
        let r = run(Some("u2"));
        assert!(owned_by(&r, &[owner("BenchmarkRun", "bench", "u2")]));
        // The earlier run of the same name, a user's object, one of no owner: not ours.
        assert!(!owned_by(&r, &[owner("BenchmarkRun", "bench", "u1")]));
        assert!(!owned_by(&r, &[owner("Deployment", "app", "x")]));
        assert!(!owned_by(&r, &[]));
        // A run without a UID (never from the API server) owns nothing.
        assert!(!owned_by(&run(None), &[owner("BenchmarkRun", "bench", "")]));
    }

    #[test]
    fn the_error_says_whose_the_object_is() {
        let r = run(Some("u2"));
        let e = ours(
            &r,
            &[owner("BenchmarkRun", "bench", "u1")],
            "Pod bench-w0".into(),
        )
        .expect_err("earlier run's");
        assert!(
            matches!(
                e,
                Error::NotOurs {
                    earlier_run: true,
                    ..
                }
            ),
            "{e}"
        );
        let e = ours(&r, &[], "PersistentVolumeClaim bench-w0-data".into()).expect_err("no owner");
        assert!(e.to_string().contains("it has no owner"), "{e}");
    }

    #[test]
    fn every_delete_names_the_uid() {
        let dp = with_uid(DeleteParams::background(), "u2");
        assert_eq!(dp.preconditions.and_then(|p| p.uid).as_deref(), Some("u2"));
    }
}
