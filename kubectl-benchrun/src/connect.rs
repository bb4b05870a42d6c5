//! A client and a namespace from kubectl's flags: `--kubeconfig`, `--context`, `-n`, as
//! kubectl resolves them (the flag, else the context's namespace, else `default`).

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Namespace;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::cli::Global;
use crate::exit::bad_input;

/// Where the commands act.
pub struct Target {
    /// The API client.
    pub client: Client,
    /// The namespace of the runs.
    pub namespace: String,
}

impl Target {
    /// A namespaced API of `K` in the target namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }
}

/// Connect as kubectl would with these flags.
pub async fn connect(g: &Global) -> Result<Target> {
    let opts = KubeConfigOptions {
        context: g.context.clone(),
        ..Default::default()
    };
    let config = match (&g.kubeconfig, &g.context) {
        (Some(path), _) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(anyhow::Error::from)
        }
        (None, Some(_)) => {
            let kc = Kubeconfig::read().context("reading the kubeconfig")?;
            Config::from_custom_kubeconfig(kc, &opts)
                .await
                .map_err(anyhow::Error::from)
        }
        // Also in a pod, with its service account.
        (None, None) => Config::infer().await.map_err(anyhow::Error::from),
    }
    .map_err(|e| match &g.context {
        Some(c) => bad_input(format!("context {c}: {e:#}")),
        None => e,
    })
    .context("loading the kubeconfig")?;
    let namespace = g
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).context("building the API client")?;
    Ok(Target { client, namespace })
}

/// Whether the namespace exists: `Some(false)` only when the API server says it does not (a
/// user without the right to read namespaces gets `None`, and the plain error).
pub async fn namespace_exists(t: &Target) -> Option<bool> {
    let nss: Api<Namespace> = Api::all(t.client.clone());
    match nss.get_opt(&t.namespace).await {
        Ok(found) => Some(found.is_some()),
        Err(_) => None,
    }
}

/// An error for a missing object: names the namespace when that is what is missing.
pub async fn not_found(t: &Target, what: &str) -> anyhow::Error {
    if namespace_exists(t).await == Some(false) {
        bad_input(format!("namespace \"{}\" not found", t.namespace))
    } else {
        bad_input(format!("{what} not found in namespace \"{}\"", t.namespace))
    }
}

/// `e` explained when it means the CRD is not installed: a 404 that is not about an object
/// (the API server answers `404 page not found` for a resource it does not serve).
pub fn explain(e: kube::Error, doing: &str) -> anyhow::Error {
    match &e {
        kube::Error::Api(s) if s.code == 404 && s.reason != "NotFound" => bad_input(format!(
            "{doing}: the API server does not serve benchmarkruns.benchrun.dev: is benchrun (its CRD) installed?"
        )),
        _ => anyhow::Error::new(e).context(doing.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure("m", reason).with_code(code).boxed())
    }

    #[test]
    fn a_bare_404_means_the_crd_is_missing_and_is_bad_input() {
        let e = explain(
            api(404, "Failed to parse error data"),
            "listing benchmarkruns",
        );
        assert_eq!(crate::exit::of_error(&e), crate::exit::BAD_INPUT);
        assert!(crate::exit::one_line(&e).contains("is benchrun (its CRD) installed?"));
        // An object's NotFound and other errors keep their own message, with the context.
        let e = explain(api(404, "NotFound"), "reading benchmarkrun x");
        assert!(crate::exit::one_line(&e).starts_with("reading benchmarkrun x: "));
        let e = explain(api(500, "InternalError"), "listing benchmarkruns");
        assert_eq!(crate::exit::of_error(&e), crate::exit::ERROR);
    }
}
