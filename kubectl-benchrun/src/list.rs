//! `list`: the runs of a namespace as kubectl prints objects, with the figures a benchmark
//! user looks for first (the merged result, or the live rate while running).

use anyhow::Result;
use benchrun_operator::crd::BenchmarkRun;
use kube::api::ListParams;
use kube::Api;

use crate::cli::{ListArgs, ListOutput, Output};
use crate::connect::{explain, namespace_exists, Target};
use crate::exit::{bad_input, OK};
use crate::show::encode;

/// One printed row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Namespace (with `-A`).
    pub namespace: String,
    /// NAME.
    pub name: String,
    /// PHASE.
    pub phase: String,
    /// WORKERS: the status's summary (`2/2`), else the number of workers.
    pub workers: String,
    /// OPS/S: merged, or live while running.
    pub ops: String,
    /// MIB/S: merged.
    pub mib: String,
    /// P99: merged, all ops.
    pub p99: String,
    /// AGE.
    pub age: String,
    /// TARGET (wide).
    pub target: String,
    /// THRESHOLDS (wide): `met/total`.
    pub thresholds: String,
    /// FINISHED (wide): how long ago the run finished, `-` while it runs.
    pub finished: String,
}

/// The row of `run` at `now` (Unix seconds).
pub fn row(run: &BenchmarkRun, now: i64) -> Row {
    let st = run.status.clone().unwrap_or_default();
    let all = st.results.get("all");
    let dash = || "-".to_string();
    let workers = st.workers_summary.clone().unwrap_or_else(|| {
        if st.workers.is_empty() {
            dash()
        } else {
            st.workers.len().to_string()
        }
    });
    let ops = match (all, &st.progress) {
        (Some(a), _) => format!("{:.1}", a.ops_per_sec),
        (None, Some(p)) => format!("{:.1}", p.ops_per_sec),
        _ => dash(),
    };
    let thresholds = if st.thresholds.is_empty() {
        dash()
    } else {
        format!(
            "{}/{}",
            st.thresholds.iter().filter(|c| c.met).count(),
            st.thresholds.len()
        )
    };
    Row {
        namespace: run.metadata.namespace.clone().unwrap_or_default(),
        name: run.metadata.name.clone().unwrap_or_default(),
        phase: st.phase.as_str().to_string(),
        workers,
        ops,
        mib: all.map_or_else(dash, |a| format!("{:.1}", a.mib_per_sec)),
        p99: all.map_or_else(dash, |a| format!("{:.3}ms", a.p99_ms)),
        age: run
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or_else(dash, |t| age(now - t.0.as_second())),
        target: run.spec.workload.target.clone(),
        thresholds,
        finished: st
            .finish_time
            .as_deref()
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map_or_else(dash, |t| format!("{} ago", age(now - t.timestamp()))),
    }
}

/// An age as kubectl prints it (`45s`, `5m3s`, `3h`, `2d5h`).
pub fn age(secs: i64) -> String {
    let s = secs.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86_400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if d < 2 => format!("{h}h"),
        _ if d < 8 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

/// The rows as an aligned table (columns three spaces apart, as kubectl's).
pub fn render(rows: &[Row], wide: bool, namespaces: bool) -> String {
    let mut header = vec![];
    if namespaces {
        header.push("NAMESPACE");
    }
    header.extend(["NAME", "PHASE", "WORKERS", "OPS/S", "MIB/S", "P99", "AGE"]);
    if wide {
        header.extend(["THRESHOLDS", "TARGET", "FINISHED"]);
    }
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        let mut cells = vec![];
        if namespaces {
            cells.push(r.namespace.clone());
        }
        cells.extend([
            r.name.clone(),
            r.phase.clone(),
            r.workers.clone(),
            r.ops.clone(),
            r.mib.clone(),
            r.p99.clone(),
            r.age.clone(),
        ]);
        if wide {
            cells.extend([r.thresholds.clone(), r.target.clone(), r.finished.clone()]);
        }
        table.push(cells);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &table {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    out
}

/// `kubectl benchrun list`.
pub async fn main(t: &Target, args: &ListArgs) -> Result<u8> {
    let params = match &args.selector {
        Some(s) => ListParams::default().labels(s),
        None => ListParams::default(),
    };
    let runs: Vec<BenchmarkRun> = fetch(t, args.all_namespaces, &params, "benchmarkruns").await?;
    match args.output {
        o if print_as_list(&runs, o)? => {}
        _ if runs.is_empty() => {
            eprintln!("No benchmarkruns found in namespace {}.", t.namespace)
        }
        o => {
            let now = chrono::Utc::now().timestamp();
            let rows: Vec<Row> = runs.iter().map(|r| row(r, now)).collect();
            print!(
                "{}",
                render(&rows, o == Some(ListOutput::Wide), args.all_namespaces)
            );
        }
    }
    Ok(OK)
}

/// The `plural` objects of the target's namespace (of every namespace with `-A`), sorted by
/// namespace and name. None in a namespace that does not exist is an error, as kubectl says it.
pub async fn fetch<K>(
    t: &Target,
    all_namespaces: bool,
    params: &ListParams,
    plural: &str,
) -> Result<Vec<K>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    let api: Api<K> = if all_namespaces {
        Api::all(t.client.clone())
    } else {
        t.api()
    };
    let mut items = api
        .list(params)
        .await
        .map_err(|e| explain(e, &format!("listing {plural}")))?
        .items;
    items.sort_by(|a, b| {
        let key = |k: &K| (k.meta().namespace.clone(), k.meta().name.clone());
        key(a).cmp(&key(b))
    });
    if items.is_empty() && !all_namespaces && namespace_exists(t).await == Some(false) {
        return Err(bad_input(format!(
            "namespace \"{}\" not found",
            t.namespace
        )));
    }
    Ok(items)
}

/// `-o json|yaml`: print the items as a kubectl `List` and say so; the table outputs print
/// nothing here.
pub fn print_as_list<K: serde::Serialize>(items: &[K], output: Option<ListOutput>) -> Result<bool> {
    let o = match output {
        Some(ListOutput::Json) => Output::Json,
        Some(ListOutput::Yaml) => Output::Yaml,
        _ => return Ok(false),
    };
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    print!("{}", encode(&list, o)?);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchrun_operator::crd::{BenchmarkRunStatus, OpReport, Phase, Progress};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn run(name: &str, status: BenchmarkRunStatus, created: i64) -> BenchmarkRun {
        let spec = serde_yaml::from_str(
            "workload: {target: file:///data/x, duration: 10s, ops: [{op: get}]}",
        )
        .unwrap();
        let mut r = BenchmarkRun::new(name, spec);
        r.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created).expect("time"),
        ));
        r.status = Some(status);
        r
    }

    #[test]
    fn rows_show_merged_or_live_figures() {
        let now = 1_800_000_000;
        let done = run(
            "done",
            BenchmarkRunStatus {
                phase: Phase::Succeeded,
                workers_summary: Some("2/2".into()),
                results: [(
                    "all".to_string(),
                    OpReport {
                        ops_per_sec: 1234.56,
                        mib_per_sec: 78.91,
                        p99_ms: 1.5,
                        ..Default::default()
                    },
                )]
                .into(),
                finish_time: Some("2027-01-15T07:59:00Z".into()),
                ..Default::default()
            },
            now - 330,
        );
        let live = run(
            "live",
            BenchmarkRunStatus {
                phase: Phase::Running,
                progress: Some(Progress {
                    ops_per_sec: 10.0,
                    ..Default::default()
                }),
                ..Default::default()
            },
            now - 5,
        );
        let rows = vec![row(&done, now), row(&live, now)];
        assert_eq!(
            (
                rows[0].ops.as_str(),
                rows[0].mib.as_str(),
                rows[0].p99.as_str()
            ),
            ("1234.6", "78.9", "1.500ms")
        );
        assert_eq!(rows[0].age, "5m30s");
        // 1_800_000_000 is 2027-01-15T08:00:00Z: finished a minute before.
        assert_eq!(rows[0].finished, "60s ago");
        assert_eq!(rows[1].finished, "-");
        assert_eq!((rows[1].ops.as_str(), rows[1].mib.as_str()), ("10.0", "-"));
        assert_eq!(
            render(&rows, false, false),
            "NAME   PHASE       WORKERS   OPS/S    MIB/S   P99       AGE\n\
             done   Succeeded   2/2       1234.6   78.9    1.500ms   5m30s\n\
             live   Running     -         10.0     -       -         5s\n"
        );
        let wide = render(&rows, true, true);
        assert!(wide.starts_with("NAMESPACE   NAME"), "{wide}");
        assert!(
            wide.lines().next().unwrap().contains("THRESHOLDS   TARGET")
                && wide.lines().next().unwrap().ends_with("FINISHED")
                && wide.contains("60s ago"),
            "{wide}"
        );
    }

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        for (s, want) in [
            (-3, "0s"),
            (59, "59s"),
            (119, "119s"),
            (125, "2m5s"),
            (700, "11m"),
            (4 * 3600 + 120, "4h2m"),
            (10 * 3600, "10h"),
            (3 * 86_400 + 3600, "3d1h"),
            (30 * 86_400, "30d"),
        ] {
            assert_eq!(age(s), want, "{s}");
        }
    }
}
