//! `s3://bucket/prefix`: AWS S3 and S3-compatible servers (MinIO, ...).

use object_store::aws::AmazonS3Builder;
use object_store::{ClientOptions, RetryConfig};

use super::connections::CountingConnector;
use super::credentials::{CredentialSource, Redactor};
use super::{Backend, Stores};
use crate::spec::StorageSpec;
use crate::targets::TargetError;

const KEY_ID: (&str, &[&str]) = ("accessKeyId", &["AWS_ACCESS_KEY_ID"]);
const SECRET: (&str, &[&str]) = ("secretAccessKey", &["AWS_SECRET_ACCESS_KEY"]);
const TOKEN: (&str, &[&str]) = ("sessionToken", &["AWS_SESSION_TOKEN"]);

pub fn build(
    bucket: &str,
    storage: &StorageSpec,
    (client, connector): (ClientOptions, CountingConnector),
    retry: RetryConfig,
    creds: &CredentialSource,
    redact: &mut Redactor,
) -> Result<Stores, TargetError> {
    let key_id = creds.get(KEY_ID.0, KEY_ID.1)?;
    let secret = creds.get(SECRET.0, SECRET.1)?;
    let token = creds.get(TOKEN.0, TOKEN.1)?;
    let region = storage
        .region
        .clone()
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .unwrap_or_else(|| "us-east-1".into());
    let mut b = match (&key_id, &secret) {
        (Some(id), Some(secret)) => {
            redact.add(secret);
            let mut b = AmazonS3Builder::new()
                .with_access_key_id(id.expose())
                .with_secret_access_key(secret.expose());
            if let Some(t) = &token {
                redact.add(t);
                b = b.with_token(t.expose());
            }
            b
        }
        // Without an endpoint this is AWS itself: let object_store find credentials the AWS
        // way (web identity, ECS, instance metadata), as the SDKs do.
        _ if storage.endpoint.is_none() => AmazonS3Builder::from_env(),
        // With an endpoint, object_store would otherwise ask the EC2 metadata service at
        // 169.254.169.254: refuse instead, the network rule allows no such fallback.
        _ => {
            return Err(TargetError::Config(format!(
                "s3://{bucket}: storage.endpoint is set but no S3 keys were found: set {} and {}. \
                 benchrun never falls back to an instance metadata service when an endpoint is configured",
                creds.hint(KEY_ID.0, KEY_ID.1),
                creds.hint(SECRET.0, SECRET.1)
            )))
        }
    };
    b = b
        .with_bucket_name(bucket)
        .with_region(region)
        .with_client_options(client)
        .with_http_connector(connector)
        .with_retry(retry)
        // A DELETE op is one DeleteObject request, not a one-key bulk POST.
        .with_disable_bulk_delete(true)
        // Hashing each PUT body cost about half of the client's CPU per GiB written.
        .with_unsigned_payload(!storage.sign_payload);
    if let Some(ep) = &storage.endpoint {
        // S3-compatible servers are addressed path-style unless told otherwise.
        b = b
            .with_endpoint(ep)
            .with_virtual_hosted_style_request(!storage.path_style.unwrap_or(true));
    } else if let Some(p) = storage.path_style {
        b = b.with_virtual_hosted_style_request(!p);
    }
    let store = b.build().map_err(|e| {
        TargetError::Config(format!("s3://{bucket}: {}", redact.clean(&e.to_string())))
    })?;
    Ok(Stores::new(Backend::S3, store))
}
