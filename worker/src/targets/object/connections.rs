//! The HTTP client of an object storage target, built here so that every TCP connection it
//! opens is counted.
//!
//! object_store builds its reqwest client itself and offers no hook at the connection level:
//! a custom DNS resolver is not asked for an IP endpoint (`http://127.0.0.1:9000`), and
//! counting requests says nothing about sockets. So the target hands object_store an
//! [`HttpConnector`] of its own that builds the same client object_store would (from the
//! same [`ClientOptions`]: timeouts, pool, HTTP versions, TLS, proxy, shuffled addresses)
//! with one more [`tower_layer::Layer`] around reqwest's connector: each connection it
//! establishes adds one to an [`Opened`] counter the target and its shard clients share.
//! The engine reads that counter where its stages meet (setup, warm-up, measured stage).
//!
//! A connection counts when it is established (TCP, and TLS for `https://`), whatever it
//! then carries: object_store's credential requests too, and a connection the pool opened
//! for a request that an idle connection served first (hyper-util's client races a new
//! connection against the wait for an idle one, and keeps the loser in the pool).

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use object_store::client::{HttpClient, HttpConnector};
use object_store::{ClientConfigKey, ClientOptions};
use rand::seq::SliceRandom;

/// The user agent of every request: benchrun's, then the object_store it speaks through.
const USER_AGENT: &str = concat!("benchrun/", env!("CARGO_PKG_VERSION"), " object_store/0.14");

/// Connections established by the clients of one target (its shards' included).
#[derive(Debug, Default)]
pub struct Opened(AtomicU64);

impl Opened {
    /// Connections established so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// The [`HttpConnector`] of a target: object_store's client, plus the count.
#[derive(Debug, Clone)]
pub struct CountingConnector {
    opened: Arc<Opened>,
    /// `storage.tls.caFile`'s certificates, trusted besides the system's.
    roots: Vec<reqwest::Certificate>,
}

impl CountingConnector {
    /// A connector whose clients count into `opened` and trust `roots` too.
    pub fn new(opened: Arc<Opened>, roots: Vec<reqwest::Certificate>) -> Self {
        Self { opened, roots }
    }
}

impl HttpConnector for CountingConnector {
    fn connect(&self, o: &ClientOptions) -> object_store::Result<HttpClient> {
        let client = client(o, &self.roots, self.opened.clone()).map_err(|e| {
            object_store::Error::Generic {
                store: "HTTP client",
                source: e.into(),
            }
        })?;
        Ok(HttpClient::new(client))
    }
}

/// What object_store 0.14's `ClientOptions::client` builds from `o` (read back through its
/// config keys, which cover every setting benchrun or object_store's builders make), with
/// the counting layer around the connector.
fn client(
    o: &ClientOptions,
    roots: &[reqwest::Certificate],
    opened: Arc<Opened>,
) -> Result<reqwest::Client, String> {
    let value = |k: ClientConfigKey| o.get_config_value(&k);
    let flag = |k: ClientConfigKey| value(k).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let duration = |k: ClientConfigKey| -> Result<Option<Duration>, String> {
        value(k)
            .map(|v| humantime::parse_duration(&v).map_err(|e| format!("{k:?} `{v}`: {e}")))
            .transpose()
    };
    let number = |k: ClientConfigKey| -> Result<Option<usize>, String> {
        value(k)
            .map(|v| v.parse().map_err(|e| format!("{k:?} `{v}`: {e}")))
            .transpose()
    };
    let mut b = reqwest::ClientBuilder::new()
        .user_agent(value(ClientConfigKey::UserAgent).unwrap_or_else(|| USER_AGENT.into()))
        .connector_layer(CountLayer(opened));
    if let Some(h) = o.get_default_headers() {
        b = b.default_headers(h.clone());
    }
    if let Some(url) = value(ClientConfigKey::ProxyUrl) {
        let mut proxy = reqwest::Proxy::all(&url).map_err(|e| e.to_string())?;
        if let Some(pem) = value(ClientConfigKey::ProxyCaCertificate) {
            let ca = reqwest::Certificate::from_pem(pem.as_bytes()).map_err(|e| e.to_string())?;
            b = b.tls_certs_merge([ca]);
        }
        if let Some(excludes) = value(ClientConfigKey::ProxyExcludes) {
            proxy = proxy.no_proxy(reqwest::NoProxy::from_string(&excludes));
        }
        b = b.proxy(proxy);
    }
    b = if flag(ClientConfigKey::NoSystemCertificates) {
        b.tls_certs_only(roots.iter().cloned())
    } else {
        b.tls_certs_merge(roots.iter().cloned())
    };
    if let Some(t) = duration(ClientConfigKey::Timeout)? {
        b = b.timeout(t);
    }
    if let Some(t) = duration(ClientConfigKey::ConnectTimeout)? {
        b = b.connect_timeout(t);
    }
    if let Some(t) = duration(ClientConfigKey::ReadTimeout)? {
        b = b.read_timeout(t);
    }
    if let Some(t) = duration(ClientConfigKey::PoolIdleTimeout)? {
        b = b.pool_idle_timeout(t);
    }
    if let Some(n) = number(ClientConfigKey::PoolMaxIdlePerHost)? {
        b = b.pool_max_idle_per_host(n);
    }
    if let Some(t) = duration(ClientConfigKey::Http2KeepAliveInterval)? {
        b = b.http2_keep_alive_interval(t);
    }
    if let Some(t) = duration(ClientConfigKey::Http2KeepAliveTimeout)? {
        b = b.http2_keep_alive_timeout(t);
    }
    if flag(ClientConfigKey::Http2KeepAliveWhileIdle) {
        b = b.http2_keep_alive_while_idle(true);
    }
    if let Some(n) = number(ClientConfigKey::Http2MaxFrameSize)? {
        b = b.http2_max_frame_size(Some(n as u32));
    }
    if flag(ClientConfigKey::Http1Only) {
        b = b.http1_only();
    }
    if flag(ClientConfigKey::Http2Only) {
        b = b.http2_prior_knowledge();
    }
    if flag(ClientConfigKey::AllowInvalidCertificates) {
        b = b.danger_accept_invalid_certs(true);
    }
    if value(ClientConfigKey::RandomizeAddresses).is_none_or(|v| v.eq_ignore_ascii_case("true")) {
        b = b.dns_resolver(Arc::new(Shuffled));
    }
    // Compression would change Content-Length, which object sizes are read from.
    b.no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .https_only(!flag(ClientConfigKey::AllowHttp))
        .build()
        .map_err(|e| e.to_string())
}

/// A host name's addresses in random order, as object_store's default resolver gives them,
/// so that clients spread over a service's addresses. (Not asked for an IP address.)
struct Shuffled;

impl reqwest::dns::Resolve for Shuffled {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let mut addrs = tokio::task::spawn_blocking(move || {
                (host.as_str(), 0)
                    .to_socket_addrs()
                    .map(|it| it.collect::<Vec<SocketAddr>>())
            })
            .await??;
            addrs.shuffle(&mut rand::rng());
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(
                Box::new(addrs.into_iter()) as reqwest::dns::Addrs
            )
        })
    }
}

/// The layer around reqwest's connector.
#[derive(Clone)]
struct CountLayer(Arc<Opened>);

impl<S> tower_layer::Layer<S> for CountLayer {
    type Service = Count<S>;

    fn layer(&self, inner: S) -> Count<S> {
        Count {
            inner,
            opened: self.0.clone(),
        }
    }
}

/// reqwest's connector, counting each connection it establishes (not the attempts that
/// fail: those are the ops' connect errors).
#[derive(Clone)]
struct Count<S> {
    inner: S,
    opened: Arc<Opened>,
}

impl<S, R> tower_service::Service<R> for Count<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let connecting = self.inner.call(req);
        let opened = self.opened.clone();
        Box::pin(async move {
            let conn = connecting.await?;
            opened.add();
            Ok(conn)
        })
    }
}
