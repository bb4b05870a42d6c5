//! Checks of the Kubernetes-typed fields a run copies into its worker pods (resources,
//! tolerations, node selector, claim name, image), so that a mistake is reported in the `Valid`
//! condition before any pod exists, with the run's own field path. The apiserver's rejection
//! of a pod is still reported on the run (`Error::Rejected`) for whatever this does not know.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::crd::BenchmarkRunSpec;

/// Each problem as "spec.<field>: <why>".
pub fn check(spec: &BenchmarkRunSpec) -> Vec<String> {
    let mut errs = vec![];
    let w = &spec.workers;
    if let Some(r) = &w.resources {
        let requests = quantities(
            "spec.workers.resources.requests",
            r.requests.as_ref(),
            &mut errs,
        );
        let limits = quantities(
            "spec.workers.resources.limits",
            r.limits.as_ref(),
            &mut errs,
        );
        for (name, (req_text, req)) in &requests {
            if let Some((lim_text, lim)) = limits.get(name) {
                if req > lim {
                    errs.push(format!(
                        "spec.workers.resources.requests.{name}: {req_text} is more than the limit {lim_text}"
                    ));
                }
            }
        }
    }
    for (i, t) in w.tolerations.iter().flatten().enumerate() {
        let at = format!("spec.workers.tolerations[{i}]");
        let op = t.operator.as_deref().unwrap_or("Equal");
        match op {
            "Equal" | "Exists" => {}
            other => errs.push(format!("{at}.operator: `{other}` is not Equal or Exists")),
        }
        if op == "Exists" && t.value.as_deref().is_some_and(|v| !v.is_empty()) {
            errs.push(format!("{at}.value: must be empty with operator Exists"));
        }
        if t.key.as_deref().unwrap_or("").is_empty() && op != "Exists" {
            errs.push(format!(
                "{at}.operator: an empty key matches every taint only with operator Exists"
            ));
        }
        let effect = t.effect.as_deref().unwrap_or("");
        if !matches!(effect, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            errs.push(format!(
                "{at}.effect: `{effect}` is not NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
        if t.toleration_seconds.is_some() && effect != "NoExecute" {
            errs.push(format!(
                "{at}.tolerationSeconds: only with effect NoExecute"
            ));
        }
    }
    for (k, v) in w.node_selector.iter().flatten() {
        if let Err(why) = label_key(k) {
            errs.push(format!("spec.workers.nodeSelector: key `{k}` {why}"));
        }
        if let Err(why) = label_value(v) {
            errs.push(format!("spec.workers.nodeSelector.{k}: value `{v}` {why}"));
        }
    }
    if let Some(claim) = spec.volume.as_ref().and_then(|v| v.claim_name.as_deref()) {
        // `{worker}` becomes a worker's name (w0, w1, ...): check the longest there can be.
        let longest = crate::resources::existing_claim(claim, "w99999");
        if let Err(why) = dns_subdomain(&longest) {
            errs.push(format!(
                "spec.volume.claimName: `{}` {why} (`{{worker}}` stands for the worker's name)",
                benchrun_api::quote::clip(claim)
            ));
        }
    }
    if let Some(image) = &w.image {
        if image.is_empty()
            || image.len() > 1024
            || image.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            errs.push(format!(
                "spec.workers.image: `{}` is not an image reference (no spaces, at most 1024 characters)",
                image.escape_debug()
            ));
        }
    }
    errs
}

/// Parse every quantity of a requests/limits map, reporting the ones that do not parse.
fn quantities(
    at: &str,
    map: Option<&BTreeMap<String, Quantity>>,
    errs: &mut Vec<String>,
) -> BTreeMap<String, (String, f64)> {
    let mut out = BTreeMap::new();
    for (name, q) in map.into_iter().flatten() {
        match parse_quantity(&q.0) {
            Some(v) => {
                out.insert(name.clone(), (q.0.clone(), v));
            }
            None => errs.push(format!(
                "{at}.{name}: `{}` is not a quantity (e.g. 500m, 2, 512Mi, 1G)",
                q.0
            )),
        }
    }
    out
}

/// A Kubernetes quantity (`500m`, `1.5`, `512Mi`, `1e3`, `2G`) as a number, close enough to
/// compare requests with limits. `None` when Kubernetes would not accept it.
pub fn parse_quantity(s: &str) -> Option<f64> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(end);
    let digits = num.trim_start_matches(['+', '-']);
    if digits.is_empty()
        || digits.contains(['+', '-'])
        || digits.matches('.').count() > 1
        || digits == "."
        || num.len() - digits.len() > 1
    {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e => {
            let exp = e.strip_prefix(['e', 'E'])?;
            let exp: i32 = exp.parse().ok()?;
            10f64.powi(exp)
        }
    };
    Some(n * scale)
}

fn dns_subdomain(s: &str) -> Result<(), &'static str> {
    if s.is_empty() || s.len() > 253 {
        return Err("must be 1 to 253 characters");
    }
    for part in s.split('.') {
        dns_label_chars(part).map_err(|_| {
            "must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        })?;
    }
    Ok(())
}

fn dns_label_chars(s: &str) -> Result<(), ()> {
    let ok = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    ok.then_some(()).ok_or(())
}

fn label_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn label_key(k: &str) -> Result<(), &'static str> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        dns_subdomain(p).map_err(|_| "has a prefix that is not a DNS subdomain")?;
    }
    if !label_name(name) {
        return Err("is not a label key (at most 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit, after an optional prefix/)");
    }
    Ok(())
}

fn label_value(v: &str) -> Result<(), &'static str> {
    if v.is_empty() || label_name(v) {
        Ok(())
    } else {
        Err("is not a label value (at most 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(workers_and_volume: &str) -> BenchmarkRunSpec {
        serde_yaml::from_str(&format!(
            "workload: {{target: file:///data, duration: 1s, ops: [{{op: get}}]}}\n{workers_and_volume}"
        ))
        .expect("spec parses")
    }

    #[test]
    fn quantities_parse_like_kubernetes() {
        for (q, want) in [
            ("500m", 0.5),
            ("2", 2.0),
            ("1.5", 1.5),
            ("512Mi", 536_870_912.0),
            ("1G", 1e9),
            ("1e3", 1000.0),
            ("+3k", 3000.0),
        ] {
            assert_eq!(parse_quantity(q), Some(want), "{q}");
        }
        for bad in ["", "Mi", "1.2.3", "1x", "one", "1 Mi", "--1", "1e", "."] {
            assert_eq!(parse_quantity(bad), None, "{bad}");
        }
    }

    #[test]
    fn good_fields_pass() {
        let s = spec(
            r#"
workers:
  perNode: true
  resources: {requests: {cpu: 500m, memory: 256Mi}, limits: {cpu: "1", memory: 1Gi}}
  tolerations: [{operator: Exists}, {key: dedicated, value: storage, effect: NoSchedule}, {key: k, operator: Exists, effect: NoExecute, tolerationSeconds: 30}]
  nodeSelector: {kubernetes.io/hostname: node-1, benchrun.dev/disk: ""}
  image: registry.local:5000/benchrun-worker:0.1.0
volume: {claimName: fast-nvme.v1}
"#,
        );
        assert_eq!(check(&s), Vec::<String>::new());
    }

    #[test]
    fn each_bad_field_is_named() {
        let s = spec(
            r#"
workers:
  resources: {requests: {cpu: "2", memory: 1Gi, ephemeral-storage: lots}, limits: {cpu: 1500m, memory: 1Gi}}
  tolerations: [{operator: Maybe}, {key: a, operator: Exists, value: x}, {value: y}, {key: b, effect: NoRun}, {key: c, effect: NoSchedule, tolerationSeconds: 5}]
  nodeSelector: {"bad key!": x, zone: "-a"}
  image: "bad image"
volume: {claimName: Fast_Disk}
"#,
        );
        assert_eq!(
            check(&s),
            [
                "spec.workers.resources.requests.ephemeral-storage: `lots` is not a quantity (e.g. 500m, 2, 512Mi, 1G)",
                "spec.workers.resources.requests.cpu: 2 is more than the limit 1500m",
                "spec.workers.tolerations[0].operator: `Maybe` is not Equal or Exists",
                "spec.workers.tolerations[0].operator: an empty key matches every taint only with operator Exists",
                "spec.workers.tolerations[1].value: must be empty with operator Exists",
                "spec.workers.tolerations[2].operator: an empty key matches every taint only with operator Exists",
                "spec.workers.tolerations[3].effect: `NoRun` is not NoSchedule, PreferNoSchedule or NoExecute",
                "spec.workers.tolerations[4].tolerationSeconds: only with effect NoExecute",
                "spec.workers.nodeSelector: key `bad key!` is not a label key (at most 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit, after an optional prefix/)",
                "spec.workers.nodeSelector.zone: value `-a` is not a label value (at most 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)",
                "spec.volume.claimName: `Fast_Disk` must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit (`{worker}` stands for the worker's name)",
                "spec.workers.image: `bad image` is not an image reference (no spaces, at most 1024 characters)",
            ]
        );
    }
}
