//! `compare` and `report`: the stored merged summaries read from the cluster and handed to the
//! worker's own `compare` and `report` (one implementation, the same output as
//! `benchrun-worker compare`/`report` on the same summaries).

use anyhow::Result;
use benchrun_worker::compare;
use benchrun_worker::report::{self, Run};

use crate::cli::{CompareArgs, ReportArgs};
use crate::connect::Target;
use crate::exit::{bad_input, OK, SLOWER};
use crate::fetch;

/// The one summary of run `name` (a matrix run has several: refused, naming its children).
async fn single(t: &Target, name: &str) -> Result<Run> {
    let mut runs = fetch::report_runs(t, name).await?;
    if runs.len() != 1 {
        return Err(bad_input(format!(
            "run {name} is a matrix of {} combinations: compare two of its child runs ({name}-0, {name}-1, ...), or use report",
            runs.len()
        )));
    }
    Ok(runs.remove(0))
}

/// `kubectl benchrun compare A B`.
pub async fn main(t: &Target, args: &CompareArgs) -> Result<u8> {
    let a = single(t, &args.a).await?;
    let b = single(t, &args.b).await?;
    let c = compare::compare_in(&a.label, &a.summary, &b.label, &b.summary, args.units);
    print!("{}", compare::render::render(&c, args.format));
    if let Some(pct) = args.fail_if_slower {
        let slower = c.slower_than(pct);
        if !slower.is_empty() {
            eprintln!(
                "error: {} is slower than allowed ({pct}%): {}",
                args.b,
                slower.join("; ")
            );
            return Ok(SLOWER);
        }
    }
    Ok(OK)
}

/// `kubectl benchrun report NAME... [--out DIR]`.
pub async fn report(t: &Target, args: &ReportArgs) -> Result<u8> {
    let mut runs = vec![];
    for name in &args.names {
        runs.extend(fetch::report_runs(t, name).await?);
    }
    report::write_or_print(&runs, args.out.as_deref(), args.units)?;
    Ok(OK)
}
