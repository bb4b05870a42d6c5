//! Object storage targets (`s3://`, `gs://`, `az://`) through the `object_store` crate.

use std::sync::Arc;

use super::{Target, TargetError};
use crate::spec::{TargetUri, Workload};

/// Open an object storage target.
pub fn open(uri: &TargetUri, _workload: &Workload) -> Result<Arc<dyn Target>, TargetError> {
    Err(TargetError::Unsupported(format!(
        "{}:// targets are not built into this worker yet",
        uri.scheme()
    )))
}
