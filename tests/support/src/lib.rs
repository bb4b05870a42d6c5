//! Helpers that benchrun's tests against the real test cluster share.
//!
//! The cluster is started by `tests/cluster/up.sh` and the images by `tests/cluster/image.sh`;
//! a test that cannot reach them fails and says which script to run. It never skips.
//!
//! # Layout
//! - [`cluster`]: connect with the test kubeconfig, check the nodes, read `images.env`.
//! - [`cluster_scoped`]: PersistentVolumes and StorageClasses a test made, deleted when the
//!   guard drops.
//! - [`namespace`]: a fresh namespace per test, deleted when the guard drops; on a panic the
//!   pods' logs and the namespace's events are printed first.
//! - [`diagnostics`]: that dump, also callable on its own.
//! - [`loopdev`]: loop devices and their kernel I/O counters, for the volume tests.
//! - [`pods`]: wait for a pod phase, read logs, the restricted security context, JSON in logs.
//!
//! # Example
//! ```no_run
//! # async fn t() -> anyhow::Result<()> {
//! use benchrun_test_support::{cluster, namespace::TestNamespace};
//! let client = cluster::connect().await;
//! let ns = TestNamespace::create(&client, "smoke").await;
//! // create pods in ns.name() ...
//! # Ok(()) }
//! ```

pub mod cluster;
pub mod cluster_scoped;
pub mod diagnostics;
pub mod loopdev;
pub mod namespace;
pub mod pods;

pub use cluster::{connect, Images, NODES};
pub use cluster_scoped::ClusterScoped;
pub use diagnostics::dump_diagnostics;
pub use namespace::TestNamespace;
