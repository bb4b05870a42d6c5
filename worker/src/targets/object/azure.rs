//! `az://container/prefix`: Azure Blob Storage and Azurite.

use object_store::azure::MicrosoftAzureBuilder;
use object_store::{ClientOptions, RetryConfig};

use super::connections::CountingConnector;
use super::credentials::{CredentialSource, Redactor};
use super::{Backend, Stores};
use crate::spec::StorageSpec;
use crate::targets::TargetError;

const ACCOUNT: (&str, &[&str]) = ("accountName", &["AZURE_STORAGE_ACCOUNT_NAME"]);
const KEY: (&str, &[&str]) = (
    "accountKey",
    &["AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_ACCESS_KEY"],
);

pub fn build(
    container: &str,
    storage: &StorageSpec,
    (client, connector): (ClientOptions, CountingConnector),
    retry: RetryConfig,
    creds: &CredentialSource,
    redact: &mut Redactor,
) -> Result<Stores, TargetError> {
    let account = creds.get(ACCOUNT.0, ACCOUNT.1)?;
    let key = creds.get(KEY.0, KEY.1)?;
    let mut b = match (&storage.endpoint, &account, &key) {
        // An explicit endpoint is the account URL, e.g. `http://127.0.0.1:10000/devstoreaccount1`
        // for Azurite: requests go to `<endpoint>/<container>/<blob>`, signed with the key.
        (Some(ep), Some(account), Some(key)) => {
            redact.add(key);
            MicrosoftAzureBuilder::new()
                .with_account(account.expose())
                .with_access_key(key.expose())
                .with_endpoint(ep.trim_end_matches('/').to_string())
        }
        // With an endpoint and no key, object_store would try managed identity (a metadata
        // service): refuse instead.
        (Some(_), _, _) => {
            return Err(TargetError::Config(format!(
                "az://{container}: storage.endpoint is set but the Azure account or key is missing: set {} and {}. \
                 benchrun never falls back to a metadata service when an endpoint is configured",
                creds.hint(ACCOUNT.0, ACCOUNT.1),
                creds.hint(KEY.0, KEY.1)
            )))
        }
        (None, account, key) => {
            let mut b = MicrosoftAzureBuilder::from_env();
            if let Some(a) = account {
                b = b.with_account(a.expose());
            }
            if let Some(k) = key {
                redact.add(k);
                b = b.with_access_key(k.expose());
            }
            b
        }
    };
    b = b
        .with_container_name(container)
        .with_client_options(client)
        .with_http_connector(connector)
        .with_retry(retry);
    let store = b.build().map_err(|e| {
        TargetError::Config(format!(
            "az://{container}: {}",
            redact.clean(&e.to_string())
        ))
    })?;
    Ok(Stores::new(Backend::Azure, store))
}
