//! The operator's own Kubernetes API requests, counted by verb
//! (`benchrun_operator_api_requests_total`), so the API cost of a run per worker can be
//! measured (`bench/scale.sh`) and watched in production. A tower layer on the kube client:
//! every request passes through it, whatever part of the operator sent it.

use std::task::{Context, Poll};

use http::{Method, Request};
use prometheus::IntCounterVec;
use tower::{Layer, Service};

/// Wraps the kube client's HTTP service.
#[derive(Clone)]
pub struct CountLayer(pub IntCounterVec);

impl<S> Layer<S> for CountLayer {
    type Service = Count<S>;
    fn layer(&self, inner: S) -> Count<S> {
        Count {
            inner,
            counter: self.0.clone(),
        }
    }
}

/// The counting service.
#[derive(Clone)]
pub struct Count<S> {
    inner: S,
    counter: IntCounterVec,
}

impl<S, B> Service<Request<B>> for Count<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.counter.with_label_values(&[verb(&req)]).inc();
        self.inner.call(req)
    }
}

/// The API verb of a request: `watch` (GET with `watch=true`), `get` (get or list), `create`,
/// `update`, `patch`, `delete`.
pub fn verb<B>(req: &Request<B>) -> &'static str {
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    match *req.method() {
        Method::GET if watch => "watch",
        Method::GET => "get",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_from_method_and_query() {
        let r = |m: Method, uri: &str| {
            Request::builder()
                .method(m)
                .uri(uri)
                .body(())
                .expect("request")
        };
        assert_eq!(
            verb(&r(Method::GET, "/api/v1/namespaces/a/pods?labelSelector=x")),
            "get"
        );
        assert_eq!(
            verb(&r(
                Method::GET,
                "/apis/benchrun.dev/v1alpha1/benchmarkruns?watch=true&timeoutSeconds=290"
            )),
            "watch"
        );
        assert_eq!(
            verb(&r(Method::POST, "/api/v1/namespaces/a/configmaps")),
            "create"
        );
        assert_eq!(verb(&r(Method::PATCH, "/apis/x/status")), "patch");
        assert_eq!(
            verb(&r(Method::DELETE, "/api/v1/namespaces/a/pods/p")),
            "delete"
        );
        assert_eq!(
            verb(&r(Method::PUT, "/apis/coordination.k8s.io/v1/leases/l")),
            "update"
        );
    }
}
