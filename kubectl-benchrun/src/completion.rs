//! `completion bash|zsh|fish`: the shell completion scripts of the plugin, generated from
//! its clap options (so they never miss a flag). kubectl completes `kubectl benchrun ...`
//! itself by running `kubectl_complete-benchrun` (shipped next to the binary), which asks the
//! plugin's bash script for the words.

use clap::CommandFactory;
use clap_complete::{generate, shells};

use crate::cli::{Cli, Shell};

/// The completion script for `shell`, for the command `kubectl-benchrun`.
pub fn script(shell: Shell) -> String {
    let name = "kubectl-benchrun";
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    match shell {
        Shell::Bash => {
            // The bash generator names a subcommand's case by splitting the binary's name at
            // every `-`, but matches it against the name with `-` made `__`: with a `-` in the
            // name no subcommand completes. So it writes for `kubectl_benchrun`, and the
            // script is registered for the executable's real name.
            let alias = "kubectl_benchrun";
            generate(shells::Bash, &mut cmd, alias, &mut out);
            let text = String::from_utf8_lossy(&out).replace(
                &format!("-o default {alias}\n"),
                &format!("-o default {name}\n"),
            );
            return text;
        }
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
        for word in [
            "run",
            "watch",
            "list",
            "compare",
            "completion",
            "--dry-run",
            "--selector",
        ] {
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
        // What a user's Tab gets: the script's function completes a subcommand's flags and
        // an option's values (kubectl_complete-benchrun asks it the same way).
        let complete = |words: &str| {
            let probe = format!(
                "source {file}\nCOMP_WORDS=({words})\nCOMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n\
                 fn=$(complete -p kubectl-benchrun | sed -n 's/.*-F \\([^ ]*\\).*/\\1/p')\n\
                 \"$fn\" kubectl-benchrun \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD - 1]}}\"\n\
                 printf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
                file = file.display()
            );
            let out = std::process::Command::new("bash")
                .arg("-c")
                .arg(probe)
                .output()
                .expect("bash runs");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert!(complete("kubectl-benchrun ru").contains("run"));
        assert!(complete("kubectl-benchrun list --sel").contains("--selector"));
        let outputs = complete("kubectl-benchrun compare a b -o ''");
        assert!(
            outputs.contains("markdown") && outputs.contains("json"),
            "{outputs}"
        );
        let zsh = script(Shell::Zsh);
        assert!(
            zsh.starts_with("#compdef kubectl-benchrun"),
            "{}",
            &zsh[..80]
        );
    }
}
