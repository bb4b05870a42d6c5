//! The report directory: `report.md` and the SVG charts it links to.

use std::path::{Path, PathBuf};

use super::charts::charts;
use super::markdown::document;
use super::Run;
use crate::figures::Units;

/// Write the report of `runs` into `dir` (created if missing); returns the files written,
/// `report.md` first. The tables' byte rates are in `units` (the charts' stay in MiB/s).
pub fn write(runs: &[Run], dir: &Path, units: Units) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let charts = charts(runs);
    let mut written = vec![];
    let md = dir.join("report.md");
    std::fs::write(&md, document(runs, &charts, units))?;
    written.push(md);
    for c in &charts {
        let p = dir.join(c.file);
        std::fs::write(&p, &c.svg)?;
        written.push(p);
    }
    Ok(written)
}
