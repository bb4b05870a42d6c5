//! `spec.oplog` checked, and where each run's logs go. The rule for a matrix is the
//! standalone one (`run --oplog` refuses a matrix file): one log per workload, so record a
//! combination by running it on its own.

use benchrun_api::spec::TargetUri;

use crate::crd::BenchmarkRunSpec;

/// Problems with `spec.oplog`, each naming `spec.oplog.uri` (or the field that conflicts).
pub fn validate(spec: &BenchmarkRunSpec) -> Vec<String> {
    let Some(o) = &spec.oplog else {
        return vec![];
    };
    let mut errs = vec![];
    if spec.workload.block.is_some() {
        errs.push(
            "spec.oplog: records object operations: a block workload's I/Os are not recorded"
                .into(),
        );
    }
    if spec.workload.checkpoint.is_some() {
        errs.push(
            "spec.oplog: records object operations and training reads, not a checkpoint's saves and restores"
                .into(),
        );
    }
    if spec.matrix.is_some() {
        errs.push("spec.oplog: records one workload: a matrix runs several; run a combination on its own to record it".into());
    }
    let at = "spec.oplog.uri";
    let uri = match o.uri.parse::<TargetUri>() {
        Ok(u) => u,
        Err(e) => {
            errs.push(format!("{at}: {e}"));
            return errs;
        }
    };
    if !o.uri.ends_with('/') {
        errs.push(format!(
            "{at}: must end in `/`: it is a directory, each worker's log is <uri><namespace>/<run>/<run UID>/<worker>.oplog.gz (got `{}`)",
            benchrun_api::quote::clip(&o.uri)
        ));
    }
    // An unparsable target is reported under spec.workload.target already.
    if let Ok(target) = spec.workload.target_uri() {
        if target.scheme() != uri.scheme() {
            errs.push(format!(
                "{at}: must have the target's scheme {}:// (the workers write it with the run's own storage settings and credentials), got {}://",
                target.scheme(),
                uri.scheme()
            ));
        }
    }
    errs
}

/// The directory a run's workers upload their logs to:
/// `<spec.oplog.uri><namespace>/<run>/<run UID>/`. The namespace and the UID keep apart the
/// logs of two namespaces' runs of one name, and of a run deleted and applied again (which
/// would otherwise overwrite the first one's logs while its results still name them).
pub fn run_dir(spec: &BenchmarkRunSpec, namespace: &str, run: &str, uid: &str) -> Option<String> {
    spec.oplog
        .as_ref()
        .map(|o| format!("{}{namespace}/{run}/{uid}/", o.uri))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errs(workload: &str, extra: &str) -> Vec<String> {
        let spec: BenchmarkRunSpec = serde_yaml::from_str(&format!(
            "workload: {workload}\nsecretRef: {{name: creds}}\n{extra}"
        ))
        .expect("spec");
        // `validate::spec` adds these messages unchanged to the Valid condition; calling it
        // here would make this module and `validate` depend on each other.
        validate(&spec)
    }

    const S3: &str = "{target: s3://bench/data/, duration: 5s, ops: [{op: get}], dataset: {objects: 4, size: 4KiB}}";

    #[test]
    fn a_directory_of_the_targets_scheme_is_accepted() {
        assert_eq!(
            errs(S3, "oplog: {uri: s3://logs/oplogs/}\n"),
            Vec::<String>::new()
        );
        assert_eq!(errs(S3, ""), Vec::<String>::new());
    }

    #[test]
    fn another_scheme_or_a_bad_uri_is_named() {
        assert_eq!(
            errs(S3, "oplog: {uri: gs://logs/oplogs/}\n"),
            ["spec.oplog.uri: must have the target's scheme s3:// (the workers write it with the run's own storage settings and credentials), got gs://"]
        );
        assert_eq!(
            errs(S3, "oplog: {uri: s3://logs/oplogs}\n"),
            ["spec.oplog.uri: must end in `/`: it is a directory, each worker's log is <uri><namespace>/<run>/<run UID>/<worker>.oplog.gz (got `s3://logs/oplogs`)"]
        );
        let e = errs(S3, "oplog: {uri: ftp://logs/}\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with("spec.oplog.uri: `ftp://logs/`: unknown scheme `ftp`"),
            "{e:?}"
        );
    }

    #[test]
    fn block_workloads_and_matrices_are_refused() {
        let block = "{target: file:///data/x, duration: 5s, ops: [{op: read}], block: {fileSize: 1GiB, blockSize: 4KiB}}";
        let e = errs(
            block,
            "volume: {emptyDir: {}}\noplog: {uri: file:///data/logs/}\n",
        );
        assert!(
            e.contains(
                &"spec.oplog: records object operations: a block workload's I/Os are not recorded"
                    .to_string()
            ),
            "{e:?}"
        );
        let e = errs(
            S3,
            "oplog: {uri: s3://logs/o/}\nmatrix: {parameters: {objectSize: [4KiB, 8KiB]}}\n",
        );
        assert!(
            e.contains(&"spec.oplog: records one workload: a matrix runs several; run a combination on its own to record it".to_string()),
            "{e:?}"
        );
    }

    #[test]
    fn each_run_has_its_own_directory() {
        let spec: BenchmarkRunSpec =
            serde_yaml::from_str(&format!("workload: {S3}\noplog: {{uri: s3://logs/o/}}\n"))
                .expect("spec");
        assert_eq!(
            run_dir(&spec, "team-a", "nightly", "u1").as_deref(),
            Some("s3://logs/o/team-a/nightly/u1/")
        );
        // Another namespace's run of the name, the same run applied again: other directories.
        assert_ne!(
            run_dir(&spec, "team-b", "nightly", "u3"),
            run_dir(&spec, "team-a", "nightly", "u1")
        );
        assert_ne!(
            run_dir(&spec, "team-a", "nightly", "u2"),
            run_dir(&spec, "team-a", "nightly", "u1")
        );
    }
}
