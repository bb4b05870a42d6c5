//! `completion bash|zsh|fish`: the shell completion scripts of the plugin, generated from
//! its clap options (so they never miss a flag). kubectl completes `kubectl benchrun ...`
//! itself by running `kubectl_complete-benchrun` (shipped next to the binary), which asks the
//! plugin's bash script for the words.

use clap::CommandFactory;
use clap_complete::{generate, shells};

use crate::cli::{Cli, Shell};

/// The completion script for `shell`, for the command `kubectl-benchrun`.
pub fn script(shell: Shell) -> String {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    let name = "kubectl-benchrun";
    match shell {
        Shell::Bash => generate(shells::Bash, &mut cmd, name, &mut out),
        Shell::Zsh => generate(shells::Zsh, &mut cmd, name, &mut out),
        Shell::Fish => generate(shells::Fish, &mut cmd, name, &mut out),
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bash script parses (`bash -n`) and completes the subcommands and their flags.
    #[test]
    fn the_bash_script_is_valid_bash_with_every_subcommand() {
        let s = script(Shell::Bash);
        for word in ["run", "watch", "list", "compare", "completion", "--dry-run", "--selector"] {
            assert!(s.contains(word), "{word} missing");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("kubectl-benchrun.bash");
        std::fs::write(&file, &s).expect("write");
        let out = std::process::Command::new("bash")
            .arg("-n")
            .arg(&file)
            .output()
            .expect("bash runs (it is on every Debian machine)");
        assert!(
            out.status.success(),
            "bash -n refused the script: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let zsh = script(Shell::Zsh);
        assert!(zsh.starts_with("#compdef kubectl-benchrun"), "{}", &zsh[..80]);
    }
}
