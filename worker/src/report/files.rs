//! The report directory: `report.md` and the SVG charts it links to.

use std::path::{Path, PathBuf};

use super::charts::charts;
use super::markdown::document;
use super::Run;

/// Write the report of `runs` into `dir` (created if missing); returns the files written,
/// `report.md` first.
pub fn write(runs: &[Run], dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let charts = charts(runs);
    let mut written = vec![];
    let md = dir.join("report.md");
    std::fs::write(&md, document(runs, &charts))?;
    written.push(md);
    for c in &charts {
        let p = dir.join(c.file);
        std::fs::write(&p, &c.svg)?;
        written.push(p);
    }
    Ok(written)
}
