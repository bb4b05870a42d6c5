//! Creating the objects a run owns without ever adopting another's: names are fixed, so a
//! run deleted and applied again before garbage collection removed the first one's objects
//! would otherwise take them over (a workload of the old spec, a result object with the old
//! results).

use kube::api::PostParams;
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

/// Whether an object with these owners is `run`'s; an error that says whose it is if not.
pub(crate) fn ours(
    run: &BenchmarkRun,
    owners: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference],
    what: String,
) -> Result<()> {
    if owners
        .iter()
        .any(|o| Some(&o.uid) == run.metadata.uid.as_ref())
    {
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
