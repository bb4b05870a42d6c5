//! Several endpoints of one storage (`storage.endpoints`): the gateway nodes of a cluster,
//! each with clients of its own.
//!
//! The measured stage does not go through [`Spread`]'s own methods: the engine asks for
//! [`Target::endpoints`] and sends operation number i (its ticket) to endpoint i mod n, so the
//! spreading is exact and every op is counted under the endpoint that served it. Everything
//! else (the prepare stage, cleanup, a sweep's listing) calls [`Spread`] directly, which takes
//! the endpoints in turn, one call each.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    ChunkPlan, GetOutcome, GetRequest, ListOutcome, ObjectInfo, Payload, Target, TargetError,
};

/// One endpoint: its URL (as the workload gives it, the key of the summary's figures) and
/// the target bound to it.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The endpoint's URL.
    pub url: String,
    /// A target whose every request goes to this endpoint.
    pub target: Arc<dyn Target>,
}

/// A target spread over several endpoints, round robin.
#[derive(Debug)]
pub struct Spread {
    endpoints: Vec<Endpoint>,
    next: AtomicUsize,
}

impl Spread {
    /// Spread over `endpoints` (at least one; validation refuses an empty list).
    pub fn new(endpoints: Vec<Endpoint>) -> Result<Self, TargetError> {
        if endpoints.is_empty() {
            return Err(TargetError::Config(
                "storage.endpoints: the list is empty".into(),
            ));
        }
        Ok(Self {
            endpoints,
            next: AtomicUsize::new(0),
        })
    }

    /// The endpoint of the next call's turn.
    fn turn(&self) -> &Arc<dyn Target> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.endpoints.len();
        &self.endpoints[i].target
    }
}

#[async_trait]
impl Target for Spread {
    async fn get(&self, key: &str, req: &GetRequest) -> Result<GetOutcome, TargetError> {
        self.turn().get(key, req).await
    }

    async fn put(&self, key: &str, data: Payload) -> Result<u32, TargetError> {
        self.turn().put(key, data).await
    }

    async fn stat(&self, key: &str) -> Result<ObjectInfo, TargetError> {
        self.turn().stat(key).await
    }

    async fn list(&self, prefix: &str) -> Result<ListOutcome, TargetError> {
        self.turn().list(prefix).await
    }

    async fn delete(&self, key: &str) -> Result<(), TargetError> {
        self.turn().delete(key).await
    }

    async fn put_file(&self, key: &str, path: &std::path::Path) -> Result<u64, TargetError> {
        self.turn().put_file(key, path).await
    }

    /// Every endpoint is checked, in order: a gateway that is down or whose certificate
    /// cannot be verified stops the run before it starts, named by its own message.
    async fn check(&self) -> Result<(), TargetError> {
        for e in &self.endpoints {
            e.target.check().await?;
        }
        Ok(())
    }

    fn default_plan(&self) -> ChunkPlan {
        self.endpoints[0].target.default_plan()
    }

    fn for_shard(&self) -> Result<Option<Arc<dyn Target>>, TargetError> {
        let endpoints = self
            .endpoints
            .iter()
            .map(|e| {
                Ok(Endpoint {
                    url: e.url.clone(),
                    target: e.target.for_shard()?.unwrap_or_else(|| e.target.clone()),
                })
            })
            .collect::<Result<Vec<_>, TargetError>>()?;
        Ok(Some(Arc::new(Spread::new(endpoints)?)))
    }

    fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    fn connections_opened(&self) -> Option<u64> {
        self.endpoints
            .iter()
            .map(|e| e.target.connections_opened())
            .sum()
    }
}
