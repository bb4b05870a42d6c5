//! A Kubernetes API server in memory, for unit tests of what the operator sends: objects kept
//! by path, answering get, create and delete as the API server does (a name taken is 409
//! `AlreadyExists`, a delete whose UID precondition does not match is 409 `Conflict`), with a
//! log of every request. A test seeds the objects a user has, runs the operator's code on a
//! [`FakeApi::client`], then reads what is left and what was sent.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use serde_json::{json, Value};

/// One request the fake answered.
#[derive(Clone, Debug)]
pub struct Sent {
    /// GET, POST, DELETE...
    pub method: Method,
    /// The path, without the query.
    pub path: String,
    /// The JSON body (`Null` when there was none).
    pub body: Value,
}

#[derive(Default)]
struct State {
    /// Objects by path (`/api/v1/namespaces/ns/pods/name`).
    objects: BTreeMap<String, Value>,
    sent: Vec<Sent>,
    next_uid: u64,
}

/// The fake server; clones share its state.
#[derive(Clone, Default)]
pub struct FakeApi(Arc<Mutex<State>>);

impl FakeApi {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A kube client whose every request this fake answers.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    /// Put `obj` in the collection at `collection` (as another client would have created
    /// it); its UID.
    pub fn seed(&self, collection: &str, obj: Value) -> String {
        let (_, uid) = self.lock().insert(collection, obj);
        uid
    }

    /// The object at `path`, if any.
    pub fn object(&self, path: &str) -> Option<Value> {
        self.lock().objects.get(path).cloned()
    }

    /// Every request so far.
    pub fn sent(&self) -> Vec<Sent> {
        self.lock().sent.clone()
    }

    /// The DELETE requests so far.
    pub fn deletes(&self) -> Vec<Sent> {
        self.sent()
            .into_iter()
            .filter(|s| s.method == Method::DELETE)
            .collect()
    }
}

impl State {
    /// Store `obj` under `collection`, giving it a UID: its path and UID.
    fn insert(&mut self, collection: &str, mut obj: Value) -> (String, String) {
        self.next_uid += 1;
        let uid = format!("uid-{}", self.next_uid);
        obj["metadata"]["uid"] = uid.clone().into();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let path = format!("{collection}/{name}");
        self.objects.insert(path.clone(), obj);
        (path, uid)
    }

    fn answer(
        &mut self,
        method: &Method,
        path: &str,
        query: &str,
        body: Value,
    ) -> (StatusCode, Value) {
        match *method {
            Method::GET if is_collection(path) => (StatusCode::OK, self.list(path, query)),
            Method::GET => match self.objects.get(path) {
                Some(o) => (StatusCode::OK, o.clone()),
                None => not_found(path),
            },
            Method::POST => {
                let name = body["metadata"]["name"].as_str().unwrap_or_default();
                if self.objects.contains_key(&format!("{path}/{name}")) {
                    return status(StatusCode::CONFLICT, "AlreadyExists", name);
                }
                let (path, _) = self.insert(path, body);
                (StatusCode::CREATED, self.objects[&path].clone())
            }
            Method::DELETE => {
                let Some(o) = self.objects.get(path) else {
                    return not_found(path);
                };
                let want = &body["preconditions"]["uid"];
                if !want.is_null() && *want != o["metadata"]["uid"] {
                    return status(StatusCode::CONFLICT, "Conflict", path);
                }
                let gone = self.objects.remove(path).unwrap_or_default();
                (StatusCode::OK, gone)
            }
            _ => status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", path),
        }
    }

    /// The objects of the collection at `path`; of one name with the field selector
    /// `metadata.name=NAME` (the only selector the fake knows).
    fn list(&self, path: &str, query: &str) -> Value {
        let prefix = format!("{path}/");
        let name = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("fieldSelector="))
            .map(|v| v.replace("%3D", "=").replace("%3d", "="))
            .and_then(|v| v.strip_prefix("metadata.name=").map(str::to_string));
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .filter(|(_, v)| {
                name.as_ref()
                    .is_none_or(|n| v["metadata"]["name"] == n.as_str())
            })
            .map(|(_, v)| v.clone())
            .collect();
        json!({"kind": "List", "apiVersion": "v1", "metadata": {}, "items": items})
    }
}

/// Whether `path` names a collection (`/api/v1/namespaces/NS/pods`, `/apis/G/V/PLURAL`)
/// rather than one object in it.
fn is_collection(path: &str) -> bool {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match parts.first() {
        Some(&"api") => parts.get(2..),
        _ => parts.get(3..),
    }
    .unwrap_or_default();
    match rest.first() {
        Some(&"namespaces") => rest.len() == 3,
        _ => rest.len() == 1,
    }
}

fn not_found(what: &str) -> (StatusCode, Value) {
    status(StatusCode::NOT_FOUND, "NotFound", what)
}

fn status(code: StatusCode, reason: &str, what: &str) -> (StatusCode, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
               "message": format!("{reason}: {what}"), "code": code.as_u16()}),
    )
}

impl tower::Service<Request<Body>> for FakeApi {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Body>) -> Self::Future {
        let fake = self.clone();
        Box::pin(async move {
            let method = req.method().clone();
            let path = req.uri().path().to_string();
            let query = req.uri().query().unwrap_or_default().to_string();
            let bytes = req.into_body().collect_bytes().await.unwrap_or_default();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let (code, answer) = {
                let mut st = fake.lock();
                st.sent.push(Sent {
                    method: method.clone(),
                    path: path.clone(),
                    body: body.clone(),
                });
                st.answer(&method, &path, &query, body)
            };
            let mut resp = Response::new(Body::from(answer.to_string().into_bytes()));
            *resp.status_mut() = code;
            Ok(resp)
        })
    }
}
