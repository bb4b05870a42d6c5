//! What the operator lets a run ask for, beyond what the schema allows.
//!
//! Whoever can create a BenchmarkRun gets pods created by the operator's ServiceAccount, so
//! the operator's administrator, not the run's author, decides which worker images those pods
//! may run and whether they may mount the node's files (`hostPath`). A run that asks for more
//! is reported in its `Valid` condition and never gets a pod. See docs/SECURITY.md.

use crate::crd::BenchmarkRunSpec;

/// The administrator's limits (operator flags, chart values).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Images a run may name in `workers.image`, besides the operator's default worker image:
    /// exact references, or prefixes ending in `*` (`registry.example/benchrun-worker:*`).
    pub allowed_images: Vec<String>,
    /// Whether runs may mount `hostPath` volumes (off by default: they expose the node).
    pub allow_host_path: bool,
    /// Whether runs may ask for an `Unconfined` seccomp profile (off by default: every
    /// system call open to whoever creates runs). `RuntimeDefault` and `Localhost` profiles,
    /// which the nodes' administrator installs, are always allowed.
    pub allow_unconfined_seccomp: bool,
}

impl Policy {
    fn image_allowed(&self, image: &str, default_image: &str) -> bool {
        image == default_image
            || self
                .allowed_images
                .iter()
                .any(|p| match p.strip_suffix('*') {
                    Some(prefix) => image.starts_with(prefix),
                    None => image == p,
                })
    }

    /// Each way `spec` exceeds the policy, as "spec.<field>: <why>".
    pub fn check(&self, spec: &BenchmarkRunSpec, default_image: &str) -> Result<(), Vec<String>> {
        let mut errs = Vec::new();
        if let Some(image) = &spec.workers.image {
            if !self.image_allowed(image, default_image) {
                let mut allowed = vec![format!("{default_image} (the default)")];
                allowed.extend(self.allowed_images.iter().cloned());
                errs.push(format!(
                    "spec.workers.image: `{image}` is not allowed by this operator (allowed: {}); its administrator can add it to allowedWorkerImages",
                    allowed.join(", ")
                ));
            }
        }
        if spec.volume.as_ref().is_some_and(|v| v.host_path.is_some()) && !self.allow_host_path {
            errs.push(
                "spec.volume.hostPath: this operator does not allow hostPath volumes (they expose the node's files to the run); use a claim or emptyDir, or ask its administrator to set allowHostPath".into(),
            );
        }
        if let Some(p) = &spec.workers.seccomp_profile {
            match p.type_.as_str() {
                "RuntimeDefault" | "Localhost" => {}
                "Unconfined" if self.allow_unconfined_seccomp => {}
                "Unconfined" => errs.push(
                    "spec.workers.seccompProfile: this operator does not allow Unconfined (every system call open to the run); use a Localhost profile that allows io_uring, or ask its administrator to set allowUnconfinedSeccomp".into(),
                ),
                other => errs.push(format!(
                    "spec.workers.seccompProfile.type: must be RuntimeDefault, Localhost or Unconfined (got `{}`)",
                    benchrun_api::quote::clip(other)
                )),
            }
            if p.type_ == "Localhost" && p.localhost_profile.as_deref().unwrap_or("").is_empty() {
                errs.push("spec.workers.seccompProfile.localhostProfile: a Localhost profile needs the profile's path (relative to the kubelet's seccomp directory)".into());
            }
        }
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> BenchmarkRunSpec {
        serde_yaml::from_str(&format!(
            "workload: {{target: file:///data, duration: 5s, ops: [{{op: get}}]}}\n{extra}"
        ))
        .expect("spec parses")
    }

    #[test]
    fn images_are_the_default_or_listed() {
        let p = Policy {
            allowed_images: vec!["reg.example/bench:1.0".into(), "reg.example/team/*".into()],
            allow_host_path: false,
            allow_unconfined_seccomp: false,
        };
        let ok = |extra: &str| p.check(&spec(extra), "localhost/benchrun-worker:1");
        assert_eq!(ok(""), Ok(()));
        assert_eq!(
            ok("workers: {image: 'localhost/benchrun-worker:1'}"),
            Ok(())
        );
        assert_eq!(ok("workers: {image: 'reg.example/bench:1.0'}"), Ok(()));
        assert_eq!(ok("workers: {image: 'reg.example/team/w:2'}"), Ok(()));
        let e = ok("workers: {image: 'evil.example/miner:latest'}").unwrap_err();
        assert!(
            e[0].starts_with("spec.workers.image: `evil.example/miner:latest` is not allowed"),
            "{e:?}"
        );
        // A listed exact image is not a prefix.
        assert!(ok("workers: {image: 'reg.example/bench:1.0-evil'}").is_err());
    }

    #[test]
    fn host_path_only_when_allowed() {
        let s = spec("volume: {hostPath: {path: /}}");
        let e = Policy::default().check(&s, "w").unwrap_err();
        assert!(e[0].starts_with("spec.volume.hostPath:"), "{e:?}");
        let p = Policy {
            allow_host_path: true,
            ..Policy::default()
        };
        assert_eq!(p.check(&s, "w"), Ok(()));
    }

    #[test]
    fn seccomp_profiles_other_than_unconfined_are_allowed() {
        let p = Policy::default();
        let check = |extra: &str| p.check(&spec(extra), "img");
        assert_eq!(check(""), Ok(()));
        assert_eq!(
            check("workers: {seccompProfile: {type: RuntimeDefault}}"),
            Ok(())
        );
        assert_eq!(
            check("workers: {seccompProfile: {type: Localhost, localhostProfile: profiles/io-uring.json}}"),
            Ok(())
        );
        let e = check("workers: {seccompProfile: {type: Localhost}}").unwrap_err();
        assert!(
            e[0].starts_with("spec.workers.seccompProfile.localhostProfile"),
            "{e:?}"
        );
        let e = check("workers: {seccompProfile: {type: Unconfined}}").unwrap_err();
        assert!(e[0].contains("allowUnconfinedSeccomp"), "{e:?}");
        let open = Policy {
            allow_unconfined_seccomp: true,
            ..Policy::default()
        };
        assert_eq!(
            open.check(
                &spec("workers: {seccompProfile: {type: Unconfined}}"),
                "img"
            ),
            Ok(())
        );
        let e = check("workers: {seccompProfile: {type: Anything}}").unwrap_err();
        assert!(
            e[0].contains("must be RuntimeDefault, Localhost or Unconfined"),
            "{e:?}"
        );
    }
}
