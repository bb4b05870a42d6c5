//! Leader election on a `coordination.k8s.io/v1` Lease, so that several operator replicas can
//! run and exactly one of them reconciles.
//!
//! The protocol is client-go's `leaderelection` on a Lease lock:
//! - A candidate reads the Lease and takes it when nobody holds it (`holderIdentity` empty) or
//!   when the holder's record has not changed for a whole `leaseDurationSeconds`, measured on
//!   the candidate's own monotonic clock from the moment it first saw that record. Wall clocks
//!   of different nodes are never compared, so clock skew cannot shorten a lease.
//! - Every write is a replace carrying the `resourceVersion` that was read. Of two candidates
//!   that read the same version, the apiserver accepts one write and answers 409 Conflict to
//!   the other, so two candidates cannot both win. Creating a missing Lease is the same race
//!   (409 AlreadyExists for the loser).
//! - The leader renews every [`RETRY_PERIOD`]. If it has not renewed for [`RENEW_DEADLINE`]
//!   (shorter than [`LEASE_DURATION`]), [`Elector::keep_leading`] returns and the caller must stop
//!   acting as leader: it does so before any standby may take over.
//! - On shutdown the leader clears `holderIdentity` ([`Elector::release`]), so a standby takes
//!   over at its next poll instead of after the lease duration.
//!
//! RBAC: `coordination.k8s.io` `leases`: get, create, update, in the Lease's namespace (a Role).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::time::Instant;
use tracing::{info, warn};

/// How long a lease stays valid without renewal (`leaseDurationSeconds`).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long the leader keeps leading without a successful renewal.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the leader renews and a standby polls.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Which Lease to contend for, as whom, and the timing.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Name of the Lease object (`--lease-name`).
    pub name: String,
    /// Namespace of the Lease (`--lease-namespace`, else `$POD_NAMESPACE`).
    pub namespace: String,
    /// This candidate's `holderIdentity`; unique among the replicas (the pod name).
    pub identity: String,
    /// Written as `leaseDurationSeconds`; how long standbys wait for a silent holder.
    pub lease_duration: Duration,
    /// The leader gives up after this long without a successful renewal; must be shorter than
    /// `lease_duration` so that it stops before a standby may take over.
    pub renew_deadline: Duration,
    /// Interval between the leader's renewals and a standby's polls.
    pub retry_period: Duration,
}

impl LeaderConfig {
    /// The production timing: 15 s lease, 10 s renew deadline, 2 s retry period.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
        }
    }
}

/// What one candidate should do with the Lease it just read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// We hold it: write a fresh `renewTime`.
    Renew,
    /// Nobody holds it, or its holder has stopped renewing: take it.
    Acquire,
    /// Another candidate holds a live lease.
    Wait,
}

/// The holder named in a Lease spec; an empty `holderIdentity` means nobody.
pub fn holder(spec: Option<&LeaseSpec>) -> Option<&str> {
    spec.and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// Decide from the Lease as read and how long its record has stood unchanged (on this
/// candidate's clock). `default_duration` applies when the Lease names no valid duration.
pub fn decide(
    spec: Option<&LeaseSpec>,
    identity: &str,
    unchanged_for: Duration,
    default_duration: Duration,
) -> Decision {
    match holder(spec) {
        None => Decision::Acquire,
        Some(h) if h == identity => Decision::Renew,
        Some(_) => {
            let duration = spec
                .and_then(|s| s.lease_duration_seconds)
                .filter(|d| *d > 0)
                .map(|d| Duration::from_secs(d as u64))
                .unwrap_or(default_duration);
            if unchanged_for >= duration {
                Decision::Acquire
            } else {
                Decision::Wait
            }
        }
    }
}

/// The spec to write for a `Renew` or `Acquire` decision: fields we do not manage
/// (`preferredHolder`, `strategy`) are kept; `leaseTransitions` counts changes of holder.
pub fn next_spec(
    old: Option<&LeaseSpec>,
    identity: &str,
    decision: Decision,
    duration: Duration,
    now: MicroTime,
) -> LeaseSpec {
    let mut spec = old.cloned().unwrap_or_default();
    let seconds = i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX);
    spec.lease_duration_seconds = Some(seconds);
    spec.renew_time = Some(now.clone());
    if decision == Decision::Acquire {
        let previous = holder(old).map(str::to_string);
        if previous.is_some_and(|p| p != identity) {
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.lease_transitions.get_or_insert(0);
        spec.holder_identity = Some(identity.to_string());
        spec.acquire_time = Some(now);
    }
    spec
}

/// The spec a leader writes when it steps down: nobody holds the lease, and the duration is
/// 1 s, like client-go's release, so even a candidate that ignored an empty holder would not
/// wait long.
pub fn released_spec(old: &LeaseSpec) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        acquire_time: None,
        renew_time: None,
        lease_duration_seconds: Some(1),
        ..old.clone()
    }
}

/// One candidate for one Lease.
pub struct Elector {
    api: Api<Lease>,
    config: LeaderConfig,
    /// The Lease spec last read or written, and when this candidate first saw it.
    observed: Option<(Option<LeaseSpec>, Instant)>,
}

impl Elector {
    /// An elector for the Lease `config` names, not yet holding it.
    pub fn new(client: Client, config: LeaderConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    /// The election settings.
    pub fn config(&self) -> &LeaderConfig {
        &self.config
    }

    /// The holder this candidate last saw.
    pub fn observed_holder(&self) -> Option<&str> {
        holder(self.observed.as_ref().and_then(|(s, _)| s.as_ref()))
    }

    /// One round: read the Lease (creating it, held by us, when it does not exist), then take,
    /// renew or leave it. `Ok(true)` when this candidate holds the lease afterwards. Losing a
    /// write race (409) is `Ok(false)`, not an error.
    pub async fn try_acquire_or_renew(&mut self) -> kube::Result<bool> {
        self.round(true).await
    }

    /// Like [`Elector::try_acquire_or_renew`], but never takes a lease held by someone else.
    pub async fn renew(&mut self) -> kube::Result<bool> {
        self.round(false).await
    }

    async fn round(&mut self, may_acquire: bool) -> kube::Result<bool> {
        let name = self.config.name.clone();
        let Some(lease) = self.api.get_opt(&name).await? else {
            if !may_acquire {
                self.observed = None;
                return Ok(false);
            }
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(next_spec(
                    None,
                    &self.config.identity,
                    Decision::Acquire,
                    self.config.lease_duration,
                    now(),
                )),
            };
            return self.write(self.api.create(&PostParams::default(), &lease).await);
        };
        let seen = Instant::now();
        let since = match &self.observed {
            Some((spec, at)) if *spec == lease.spec => *at,
            _ => seen,
        };
        self.observed = Some((lease.spec.clone(), since));
        let decision = decide(
            lease.spec.as_ref(),
            &self.config.identity,
            seen - since,
            self.config.lease_duration,
        );
        match decision {
            Decision::Wait => return Ok(false),
            Decision::Acquire if !may_acquire => return Ok(false),
            Decision::Acquire => info!(
                lease = %name,
                previous = ?holder(lease.spec.as_ref()),
                "taking the lease as {}",
                self.config.identity
            ),
            Decision::Renew => {}
        }
        let spec = next_spec(
            lease.spec.as_ref(),
            &self.config.identity,
            decision,
            self.config.lease_duration,
            now(),
        );
        // `lease` keeps the resourceVersion that was read: the replace is conditional on it.
        let lease = Lease {
            spec: Some(spec),
            ..lease
        };
        self.write(
            self.api
                .replace(&name, &PostParams::default(), &lease)
                .await,
        )
    }

    /// Record a successful write as the new observation; a 409 means another writer won.
    fn write(&mut self, result: kube::Result<Lease>) -> kube::Result<bool> {
        match result {
            Ok(written) => {
                let ours = holder(written.spec.as_ref()) == Some(self.config.identity.as_str());
                self.observed = Some((written.spec, Instant::now()));
                Ok(ours)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Poll every retry period until this candidate holds the lease. API errors are logged and
    /// retried: a standby must survive an apiserver restart.
    pub async fn acquire(&mut self) {
        let mut last_holder: Option<String> = None;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {
                    let h = self.observed_holder().map(str::to_string);
                    if h != last_holder {
                        info!(lease = %self.config.name, holder = ?h, "standing by");
                        last_holder = h;
                    }
                }
                Err(e) => warn!(lease = %self.config.name, "reading or writing the lease: {e}"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renew every retry period for as long as this candidate leads. Returns why leadership
    /// ended: another holder took the lease, or no renewal succeeded for the renew deadline
    /// (each request is bounded by what is left of it, so a hung apiserver cannot stretch it).
    pub async fn keep_leading(&mut self) -> String {
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let started = Instant::now();
            let left = self
                .config
                .renew_deadline
                .saturating_sub(started - last_renewed);
            match tokio::time::timeout(left, self.renew()).await {
                Ok(Ok(true)) => last_renewed = started,
                Ok(Ok(false)) => match self.observed_holder() {
                    Some(h) if h == self.config.identity => {} // lost a write race; retry
                    other => return format!("the lease is now held by {other:?}"),
                },
                Ok(Err(e)) => warn!(lease = %self.config.name, "renewing the lease: {e}"),
                Err(_) => {}
            }
            if last_renewed.elapsed() >= self.config.renew_deadline {
                return format!("no successful renewal for {:?}", self.config.renew_deadline);
            }
        }
    }

    /// Step down: clear `holderIdentity` if this candidate holds the lease. `Ok(true)` when
    /// it was released here.
    pub async fn release(&mut self) -> kube::Result<bool> {
        let Some(lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(false);
        };
        if holder(lease.spec.as_ref()) != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        let spec = released_spec(lease.spec.as_ref().unwrap_or(&LeaseSpec::default()));
        let lease = Lease {
            spec: Some(spec),
            ..lease
        };
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observed = Some((written.spec, Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Duration = Duration::from_secs(15);

    fn held(by: &str, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(by.into()),
            lease_duration_seconds: Some(seconds),
            renew_time: Some(now()),
            acquire_time: Some(now()),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn free_lease_is_taken() {
        assert_eq!(decide(None, "a", Duration::ZERO, D), Decision::Acquire);
        let empty = LeaseSpec::default();
        assert_eq!(
            decide(Some(&empty), "a", Duration::ZERO, D),
            Decision::Acquire
        );
        let blank = LeaseSpec {
            holder_identity: Some(String::new()),
            ..held("x", 15)
        };
        assert_eq!(
            decide(Some(&blank), "a", Duration::ZERO, D),
            Decision::Acquire
        );
    }

    #[test]
    fn own_lease_is_renewed_even_when_old() {
        let s = held("a", 15);
        assert_eq!(decide(Some(&s), "a", Duration::ZERO, D), Decision::Renew);
        assert_eq!(
            decide(Some(&s), "a", Duration::from_secs(100), D),
            Decision::Renew
        );
    }

    #[test]
    fn other_holder_expires_after_its_own_duration() {
        let s = held("b", 5);
        assert_eq!(
            decide(Some(&s), "a", Duration::from_millis(4999), D),
            Decision::Wait
        );
        assert_eq!(
            decide(Some(&s), "a", Duration::from_secs(5), D),
            Decision::Acquire
        );
        // No valid duration in the Lease: ours applies.
        let none = LeaseSpec {
            lease_duration_seconds: Some(0),
            ..held("b", 0)
        };
        assert_eq!(
            decide(Some(&none), "a", Duration::from_secs(14), D),
            Decision::Wait
        );
        assert_eq!(
            decide(Some(&none), "a", Duration::from_secs(15), D),
            Decision::Acquire
        );
    }

    #[test]
    fn acquiring_counts_a_transition_and_keeps_foreign_fields() {
        let old = LeaseSpec {
            preferred_holder: Some("p".into()),
            ..held("b", 5)
        };
        let t = now();
        let s = next_spec(Some(&old), "a", Decision::Acquire, D, t.clone());
        assert_eq!(s.holder_identity.as_deref(), Some("a"));
        assert_eq!(s.lease_transitions, Some(4));
        assert_eq!(s.lease_duration_seconds, Some(15));
        assert_eq!(s.acquire_time, Some(t.clone()));
        assert_eq!(s.renew_time, Some(t));
        assert_eq!(s.preferred_holder.as_deref(), Some("p"));
        // A released lease (no holder) is not a transition; a fresh one starts at 0.
        let released = released_spec(&held("a", 15));
        let s = next_spec(Some(&released), "a", Decision::Acquire, D, now());
        assert_eq!(s.lease_transitions, Some(3));
        let s = next_spec(None, "a", Decision::Acquire, D, now());
        assert_eq!(s.lease_transitions, Some(0));
    }

    #[test]
    fn renewing_moves_only_the_renew_time() {
        let old = held("a", 15);
        let t = now();
        let s = next_spec(Some(&old), "a", Decision::Renew, D, t.clone());
        assert_eq!(s.renew_time, Some(t));
        assert_eq!(s.acquire_time, old.acquire_time);
        assert_eq!(s.lease_transitions, old.lease_transitions);
        assert_eq!(s.holder_identity, old.holder_identity);
    }

    #[test]
    fn released_lease_is_free() {
        let r = released_spec(&held("a", 15));
        assert_eq!(holder(Some(&r)), None);
        assert_eq!(r.lease_transitions, Some(3));
        assert_eq!(decide(Some(&r), "b", Duration::ZERO, D), Decision::Acquire);
    }
}
