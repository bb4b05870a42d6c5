//! Creating and deleting the objects a run owns without ever touching another's: names are
//! fixed, so a run deleted and applied again before garbage collection removed the first one's
//! objects would otherwise take them over (a workload of the old spec, a result object with the
//! old results), and its cleanup would delete what a user kept (`kubectl delete --cascade=orphan`
//! to keep the data, then the same run applied again). A control-plane lifecycle's claim and
//! pod are named `<run>-cp-<i>`, so a user's StatefulSet pod can carry the same name.
//!
//! Every create of a fixed-name object goes through [`create_if_absent`]. Every delete the
//! operator sends goes through this module, and only [`delete_owned`] decides one: it takes an
//! object read from the API server (a get, a list, or the answer to the create that made it),
//! deletes it only when its owners include the owner's UID (the run's, or for a schedule's
//! runs the schedule's), and names that object's UID as a precondition, so an object replaced
//! under the name meanwhile is left alone. [`delete_if_ours`] reads by name first;
//! [`delete_itself`] is a run's own deletion after its TTL. No other module of the operator
//! calls `delete` or `delete_collection` (`tests/lint/deletes.py` fails the lint stage on one).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
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
    /// An object of that name exists and is not the owner's (or no longer the one read):
    /// left alone.
    NotOurs,
}

/// Delete `name` if it is `owner`'s (owned by the owner's UID): read, then deleted by
/// [`delete_owned`], so neither an object of the same name that is another's (a user's claim,
/// an earlier run's pod) nor one re-created under the name in between is touched.
pub(crate) async fn delete_if_ours<K>(
    api: &Api<K>,
    name: &str,
    owner: &impl Resource,
    dp: DeleteParams,
) -> Result<Deleted>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await? {
        Some(existing) => delete_owned(api, &existing, owner, dp).await,
        None => Ok(Deleted::Absent),
    }
}

/// Delete `obj`, an object read from the API server (its metadata: a get, a list, a
/// `list_metadata`, the answer to the create that made it), if its owners include `owner`'s
/// UID: the one decision of a delete the operator makes. The request names `obj`'s UID as a
/// precondition, so an object that replaced it under its name is [`Deleted::NotOurs`] and
/// left alone.
pub(crate) async fn delete_owned<K>(
    api: &Api<K>,
    obj: &impl Resource,
    owner: &impl Resource,
    dp: DeleteParams,
) -> Result<Deleted>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match deletable_uid(obj.meta(), owner.meta().uid.as_deref()) {
        Some(uid) => delete_exact(api, &obj.name_any(), uid, dp).await,
        None => Ok(Deleted::NotOurs),
    }
}

/// Delete `obj` itself (a run past its TTL), read by this pass: by its UID, so a run applied
/// again under its name since is left alone.
pub(crate) async fn delete_itself<K>(api: &Api<K>, obj: &K, dp: DeleteParams) -> Result<Deleted>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let uid = obj
        .meta()
        .uid
        .as_deref()
        .ok_or_else(|| Error::Invalid(format!("{} has no uid", obj.name_any())))?;
    delete_exact(api, &obj.name_any(), uid, dp).await
}

/// The UID to delete an object of metadata `meta` by, when it is the owner's (UID
/// `owner_uid`): `None` when either has no UID or the object's owners do not include it.
fn deletable_uid<'a>(meta: &'a ObjectMeta, owner_uid: Option<&str>) -> Option<&'a str> {
    let owners = meta.owner_references.as_deref().unwrap_or_default();
    let owned = owner_uid.is_some_and(|u| owners.iter().any(|o| o.uid == u));
    meta.uid.as_deref().filter(|_| owned)
}

/// Delete the object `name` whose UID is `uid`, and no other: the only delete request the
/// operator sends. An object of that name with another UID (409 Conflict on the precondition)
/// is [`Deleted::NotOurs`].
async fn delete_exact<K>(api: &Api<K>, name: &str, uid: &str, dp: DeleteParams) -> Result<Deleted>
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

/// Whether an object with these owners is `owner`'s (this incarnation of it: its UID), the
/// owner a run or a schedule.
pub(crate) fn owned_by(owner: &impl Resource, owners: &[OwnerReference]) -> bool {
    owner
        .meta()
        .uid
        .as_ref()
        .is_some_and(|uid| owners.iter().any(|o| &o.uid == uid))
}

/// Whether an object with these owners is `run`'s; an error that says whose it is if not.
pub(crate) fn ours(run: &BenchmarkRun, owners: &[OwnerReference], what: String) -> Result<()> {
    if owned_by(run, owners) {
        return Ok(());
    }
    Err(Error::NotOurs {
        what,
        owner: whose(run, owners),
        earlier_run: earlier_run(run, owners).is_some(),
    })
}

/// Whose an object with these owners is, said to a user who must act on it (an object that
/// is not `run`'s).
pub(crate) fn whose(run: &BenchmarkRun, owners: &[OwnerReference]) -> String {
    match (earlier_run(run, owners), owners.first()) {
        (Some(o), _) => format!(
            "it is the earlier run {}'s (uid {}), which Kubernetes is deleting",
            o.name, o.uid
        ),
        (None, Some(o)) => format!("it is owned by {} {}", o.kind, o.name),
        (None, None) => "it has no owner".into(),
    }
}

/// The owner that is an earlier run of `run`'s name (deleted and applied again).
fn earlier_run<'a>(run: &BenchmarkRun, owners: &'a [OwnerReference]) -> Option<&'a OwnerReference> {
    owners
        .iter()
        .find(|o| o.kind == "BenchmarkRun" && o.name == run.name_any())
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

    fn meta(uid: Option<&str>, owners: Vec<OwnerReference>) -> ObjectMeta {
        ObjectMeta {
            name: Some("bench-cp-0".into()),
            uid: uid.map(str::to_string),
            owner_references: Some(owners),
            ..Default::default()
        }
    }

    #[test]
    fn only_an_object_owned_by_the_owners_uid_is_deleted_and_by_its_own_uid() {
        let mine = meta(Some("obj"), vec![owner("BenchmarkRun", "bench", "u2")]);
        assert_eq!(deletable_uid(&mine, Some("u2")), Some("obj"));
        // Another owner (a StatefulSet's pod of the same name, an earlier run's), none.
        let sts = meta(Some("obj"), vec![owner("StatefulSet", "bench-cp", "s1")]);
        assert_eq!(deletable_uid(&sts, Some("u2")), None);
        assert_eq!(deletable_uid(&meta(Some("obj"), vec![]), Some("u2")), None);
        // An owner without a UID owns nothing; an object without one cannot be named.
        assert_eq!(deletable_uid(&mine, None), None);
        let no_uid = meta(None, vec![owner("BenchmarkRun", "bench", "u2")]);
        assert_eq!(deletable_uid(&no_uid, Some("u2")), None);
    }

    #[test]
    fn whose_names_the_owner_a_user_must_see() {
        let r = run(Some("u2"));
        let sts = whose(&r, &[owner("StatefulSet", "bench-cp", "s1")]);
        assert_eq!(sts, "it is owned by StatefulSet bench-cp");
        let earlier = whose(&r, &[owner("BenchmarkRun", "bench", "u1")]);
        assert!(
            earlier.contains("earlier run bench's (uid u1)"),
            "{earlier}"
        );
    }

    const PODS: &str = "/api/v1/namespaces/ns/pods";

    fn pod(name: &str, owners: serde_json::Value) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}})
    }

    fn owner_json(kind: &str, name: &str, uid: &str) -> serde_json::Value {
        serde_json::json!([{"apiVersion": "v1", "kind": kind, "name": name, "uid": uid}])
    }

    #[tokio::test]
    async fn another_owners_object_is_never_sent_a_delete() {
        let fake = crate::fake_api::FakeApi::default();
        let uid = fake.seed(
            PODS,
            pod("bench-cp-0", owner_json("StatefulSet", "bench-cp", "s1")),
        );
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(fake.client(), "ns");
        let r = run(Some("u2"));
        let got = delete_if_ours(&api, "bench-cp-0", &r, DeleteParams::default()).await;
        assert_eq!(got.expect("delete"), Deleted::NotOurs);
        assert!(fake.deletes().is_empty(), "{:?}", fake.deletes());
        let kept = fake
            .object(&format!("{PODS}/bench-cp-0"))
            .expect("still there");
        assert_eq!(kept["metadata"]["uid"], uid.as_str());
        // Nothing of that name: nothing sent either.
        let got = delete_if_ours(&api, "bench-cp-9", &r, DeleteParams::default()).await;
        assert_eq!(got.expect("delete"), Deleted::Absent);
        assert!(fake.deletes().is_empty());
    }

    #[tokio::test]
    async fn an_owned_object_is_deleted_by_the_uid_read_and_a_replacement_is_left_alone() {
        let fake = crate::fake_api::FakeApi::default();
        let api: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(fake.client(), "ns");
        let r = run(Some("u2"));
        fake.seed(
            PODS,
            pod("bench-cp-0", owner_json("BenchmarkRun", "bench", "u2")),
        );
        let read = api.get("bench-cp-0").await.expect("get");
        // Replaced under its name after it was read: a user's pod now.
        let path = format!("{PODS}/bench-cp-0");
        let theirs = fake.seed(
            PODS,
            pod("bench-cp-0", owner_json("StatefulSet", "x", "s1")),
        );
        let got = delete_owned(&api, &read, &r, DeleteParams::default()).await;
        assert_eq!(got.expect("delete"), Deleted::NotOurs);
        assert_eq!(
            fake.object(&path).expect("kept")["metadata"]["uid"],
            theirs.as_str()
        );
        let sent = fake.deletes();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert_eq!(
            sent[0].body["preconditions"]["uid"],
            read.uid().expect("uid").as_str()
        );
        // The one read, still there: deleted.
        let ours = fake.seed(
            PODS,
            pod("bench-cp-0", owner_json("BenchmarkRun", "bench", "u2")),
        );
        let read = api.get("bench-cp-0").await.expect("get");
        assert_eq!(read.uid().as_deref(), Some(ours.as_str()));
        let got = delete_owned(&api, &read, &r, DeleteParams::default()).await;
        assert_eq!(got.expect("delete"), Deleted::Yes);
        assert!(fake.object(&path).is_none());
    }

    #[tokio::test]
    async fn a_schedule_deletes_a_dynamic_run_it_owns_and_no_other() {
        let fake = crate::fake_api::FakeApi::default();
        let ar = kube::api::ApiResource::erase::<BenchmarkRun>(&());
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(fake.client(), "ns", &ar);
        let runs = "/apis/benchrun.dev/v1alpha1/namespaces/ns/benchmarkruns";
        let run = |name: &str, owner: &str| {
            serde_json::json!({"apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkRun",
                "metadata": {"name": name, "namespace": "ns",
                    "ownerReferences": owner_json("BenchmarkSchedule", "nightly", owner)}})
        };
        fake.seed(runs, run("nightly-1", "sched"));
        fake.seed(runs, run("nightly-2", "another"));
        let schedule: crate::crd::schedule::BenchmarkSchedule = serde_json::from_value(serde_json::json!({
            "apiVersion": "benchrun.dev/v1alpha1", "kind": "BenchmarkSchedule",
            "metadata": {"name": "nightly", "namespace": "ns", "uid": "sched"},
            "spec": {"schedule": "@daily", "runTemplate": {"workload": {"target": "s3://b/p/",
                "duration": "5s", "ops": [{"op": "get"}], "dataset": {"objects": 1, "size": "1KiB"}}}}
        }))
        .expect("schedule");
        for name in ["nightly-1", "nightly-2"] {
            let read = api.get(name).await.expect("get");
            let want = if name == "nightly-1" {
                Deleted::Yes
            } else {
                Deleted::NotOurs
            };
            let got = delete_owned(&api, &read, &schedule, DeleteParams::background()).await;
            assert_eq!(got.expect("delete"), want, "{name}");
        }
        assert!(fake.object(&format!("{runs}/nightly-1")).is_none());
        assert!(fake.object(&format!("{runs}/nightly-2")).is_some());
    }
}
