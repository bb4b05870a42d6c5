//! `gs://bucket/prefix`: Google Cloud Storage and emulators (fake-gcs-server).

use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::{ClientOptions, RetryConfig};

use super::connections::CountingConnector;
use super::credentials::{CredentialSource, Redactor};
use super::{Backend, Stores};
use crate::spec::StorageSpec;
use crate::targets::TargetError;

const KEY: (&str, &[&str]) = ("serviceAccountKey", &["GOOGLE_SERVICE_ACCOUNT_KEY"]);

pub fn build(
    bucket: &str,
    storage: &StorageSpec,
    (client, connector): (ClientOptions, CountingConnector),
    retry: RetryConfig,
    creds: &CredentialSource,
    redact: &mut Redactor,
) -> Result<Stores, TargetError> {
    let key = creds.get(KEY.0, KEY.1)?;
    if let Some(k) = &key {
        redact.add(k);
    }
    let mut b = match &storage.endpoint {
        Some(ep) => {
            // The endpoint goes into the service account key (`gcs_base_url`). With no key,
            // `disable_oauth` makes object_store send unauthenticated requests to the endpoint
            // only; `with_skip_signature` would still fetch a token from the GCE metadata
            // server at 169.254.169.254 on writes.
            let mut json = match &key {
                Some(k) => serde_json::from_str::<serde_json::Value>(k.expose()).map_err(|e| {
                    TargetError::Config(format!(
                        "gs://{bucket}: the GCS service account key is not valid JSON ({} at line {} column {})",
                        e.classify_name(), e.line(), e.column()
                    ))
                })?,
                None => serde_json::json!({
                    "disable_oauth": true,
                    "client_email": "",
                    "private_key": "",
                    "private_key_id": "",
                }),
            };
            match json.as_object_mut() {
                Some(o) => o.insert("gcs_base_url".into(), ep.trim_end_matches('/').into()),
                None => {
                    return Err(TargetError::Config(format!(
                        "gs://{bucket}: the GCS service account key must be a JSON object"
                    )))
                }
            };
            GoogleCloudStorageBuilder::new().with_service_account_key(json.to_string())
        }
        None => {
            let b = GoogleCloudStorageBuilder::from_env();
            match &key {
                Some(k) => b.with_service_account_key(k.expose()),
                None => b,
            }
        }
    };
    b = b
        .with_bucket_name(bucket)
        .with_client_options(client)
        .with_http_connector(connector)
        .with_retry(retry);
    let store = b.build().map_err(|e| {
        TargetError::Config(format!("gs://{bucket}: {}", redact.clean(&e.to_string())))
    })?;
    Ok(Stores::new(Backend::Gcs, store))
}

trait ClassifyName {
    fn classify_name(&self) -> &'static str;
}

impl ClassifyName for serde_json::Error {
    // Never echo the key text itself: only the kind of syntax error and where.
    fn classify_name(&self) -> &'static str {
        match self.classify() {
            serde_json::error::Category::Io => "I/O error",
            serde_json::error::Category::Syntax => "syntax error",
            serde_json::error::Category::Data => "unexpected data",
            serde_json::error::Category::Eof => "unexpected end",
        }
    }
}
