//! Key remapping in replay: `--remap 'old/prefix/=>new/prefix/'` rewrites every key (and
//! every prefix listed) that starts with `old/prefix/`. Rules are tried in the order given
//! and the first that matches applies; a key no rule matches is replayed as recorded.

use std::str::FromStr;

/// One prefix rewrite.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remap {
    from: String,
    to: String,
}

impl FromStr for Remap {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (from, to) = s.split_once("=>").ok_or_else(|| {
            format!("remap rule `{s}` has no `=>`: write it as 'old/prefix/=>new/prefix/'")
        })?;
        if to.contains("=>") {
            return Err(format!("remap rule `{s}` has more than one `=>`"));
        }
        // An empty `from` matches every key: allowed, it prefixes every key with `to`.
        Ok(Self {
            from: from.to_string(),
            to: to.to_string(),
        })
    }
}

/// Rewrite `key` by the first rule whose prefix it starts with.
pub fn apply(rules: &[Remap], key: &str) -> String {
    rules
        .iter()
        .find_map(|r| {
            key.strip_prefix(&r.from)
                .map(|rest| format!("{}{rest}", r.to))
        })
        .unwrap_or_else(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_prefix_rewrites_the_key() {
        let rules: Vec<Remap> = ["data/put/=>other/w/", "data/=>mirror/", "=>never/"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(apply(&rules, "data/put/local/0-1"), "other/w/local/0-1");
        assert_eq!(apply(&rules, "data/obj-00000001"), "mirror/obj-00000001");
        assert_eq!(apply(&rules, "x"), "never/x");
        assert_eq!(apply(&rules[..2], "x"), "x", "no rule: as recorded");
    }

    #[test]
    fn malformed_rules_are_refused() {
        assert!("data/".parse::<Remap>().unwrap_err().contains("no `=>`"));
        assert!("a=>b=>c"
            .parse::<Remap>()
            .unwrap_err()
            .contains("more than one"));
    }
}
