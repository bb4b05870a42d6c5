//! A Markdown reference generated from a JSON Schema (whose descriptions are the types' doc
//! comments): shared by docs/RESULTS.md (`results_doc.rs`) and docs/WORKLOAD.md
//! (`workload_doc.rs`), whose tests fail when the document and the schema differ.

#![allow(dead_code)]

use std::collections::{BTreeSet, VecDeque};

use serde_json::Value;

/// A document generated from a JSON Schema: its root type and the types it links to instead
/// of repeating them (a type name and the link written for it).
pub struct Doc {
    /// The root type's name (the schema's own properties).
    pub root: &'static str,
    /// Types documented elsewhere: name, and the words (a link) written for them.
    pub elsewhere: &'static [(&'static str, &'static str)],
}

impl Doc {
    fn link(&self, name: &str) -> Option<&'static str> {
        self.elsewhere
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, l)| *l)
    }
}

pub fn defs(schema: &Value) -> &serde_json::Map<String, Value> {
    schema["$defs"].as_object().expect("the schema has $defs")
}

/// `#/$defs/Name` -> `Name`.
pub fn ref_name(v: &Value) -> Option<&str> {
    v.get("$ref")?.as_str()?.strip_prefix("#/$defs/")
}

/// Every `$ref` under `v`.
pub fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            if let Some(n) = ref_name(v) {
                out.push(n);
            }
            for x in m.values() {
                refs(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// The document's own types, root first then breadth first, without the subtrees of the
/// types documented elsewhere.
pub fn types(doc: &Doc, schema: &Value) -> Vec<String> {
    let mut order = vec![doc.root.to_string()];
    let mut seen: BTreeSet<String> = order.iter().cloned().collect();
    // The root without its `$defs`: only what the summary itself refers to.
    let mut root = schema.clone();
    root.as_object_mut().map(|m| m.remove("$defs"));
    let mut queue = VecDeque::from([root]);
    while let Some(v) = queue.pop_front() {
        let mut found = vec![];
        refs(&v, &mut found);
        for n in found {
            if doc.link(n).is_some() || !seen.insert(n.to_string()) {
                continue;
            }
            order.push(n.to_string());
            queue.push_back(defs(schema)[n].clone());
        }
    }
    order
}

fn anchor(name: &str) -> String {
    format!("[`{name}`](#{})", name.to_ascii_lowercase())
}

/// A property's type in words.
fn type_of(doc: &Doc, v: &Value) -> String {
    if let Some(n) = ref_name(v) {
        return match doc.link(n) {
            Some(link) => link.into(),
            None => anchor(n),
        };
    }
    if let Some(c) = v.get("const") {
        return format!("`{}`", c.as_str().unwrap_or_default());
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = v.get(key).and_then(Value::as_array) {
            let parts: Vec<String> = alts.iter().map(|a| type_of(doc, a)).collect();
            return parts.join(" or ");
        }
    }
    let base = match &v["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let words: Vec<String> = base
        .iter()
        .map(|t| match *t {
            "array" => format!("array of {}", type_of(doc, &v["items"])),
            "object" if v.get("additionalProperties").is_some() => {
                let key = v
                    .get("propertyNames")
                    .map(|k| type_of(doc, k))
                    .unwrap_or_else(|| "string".into());
                format!(
                    "map of {key} to {}",
                    type_of(doc, &v["additionalProperties"])
                )
            }
            "string" if v.get("format").is_some() => {
                format!("string ({})", v["format"].as_str().unwrap_or_default())
            }
            t => t.to_string(),
        })
        .collect();
    if words.is_empty() {
        if let Some(e) = v.get("enum").and_then(Value::as_array) {
            return e
                .iter()
                .map(|x| format!("`{}`", x.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(", ");
        }
        return "any".into();
    }
    words.join(" or ")
}

/// One line, table-safe, rustdoc's intra-doc links (`` [`x`] ``) as plain code.
fn cell(text: &str) -> String {
    let mut out = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|");
    while let Some(start) = out.find("[`") {
        let Some(len) = out[start..].find("`]") else {
            break;
        };
        let end = start + len;
        if out[end + 2..].starts_with('(') {
            break;
        }
        out = format!(
            "{}{}{}",
            &out[..start],
            &out[start + 1..end + 1],
            &out[end + 2..]
        );
    }
    out
}

/// The definition of type `name` (the root is the schema itself).
pub fn def<'a>(doc: &Doc, schema: &'a Value, name: &str) -> &'a Value {
    if name == doc.root {
        schema
    } else {
        &defs(schema)[name]
    }
}

/// The reference: a heading per type, a table of its fields (or values).
pub fn generate(doc: &Doc, schema: &Value) -> String {
    let mut out = String::new();
    for name in types(doc, schema) {
        let def = if name == doc.root {
            schema
        } else {
            &defs(schema)[&name]
        };
        out.push_str(&format!("\n### {name}\n\n"));
        if let Some(d) = def.get("description").and_then(Value::as_str) {
            out.push_str(&format!("{}\n\n", cell(d)));
        }
        match def.get("properties").and_then(Value::as_object) {
            Some(props) => {
                let required: BTreeSet<&str> = def
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                out.push_str("| Field | Type | Required | Description |\n|---|---|---|---|\n");
                for (field, p) in props {
                    let desc = p.get("description").and_then(Value::as_str).unwrap_or("");
                    assert!(!desc.is_empty(), "{name}.{field} has no doc comment");
                    out.push_str(&format!(
                        "| `{field}` | {} | {} | {} |\n",
                        cell(&type_of(doc, p)),
                        if required.contains(field.as_str()) {
                            "yes"
                        } else {
                            "no"
                        },
                        cell(desc)
                    ));
                }
            }
            None => {
                // An enum (the op names) or a scalar with its own encoding (a histogram).
                if let Some(alts) = def.get("oneOf").and_then(Value::as_array) {
                    out.push_str("| Value | Meaning |\n|---|---|\n");
                    for a in alts {
                        out.push_str(&format!(
                            "| {} | {} |\n",
                            type_of(doc, a),
                            cell(a.get("description").and_then(Value::as_str).unwrap_or(""))
                        ));
                    }
                } else {
                    out.push_str(&format!("Encoded as: {}.\n", type_of(doc, def)));
                }
            }
        }
    }
    out
}

/// Compare the generated part of the document at `rel` (between `begin` and `end`) with
/// `generated`; with `BENCHRUN_BLESS` set, rewrite it instead. Returns the current part.
pub fn check(rel: &str, begin: &str, end: &str, generated: &str, test: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(rel);
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let (head, rest) = doc
        .split_once(begin)
        .unwrap_or_else(|| panic!("{rel} has no line {begin}"));
    let (current, tail) = rest
        .split_once(end)
        .unwrap_or_else(|| panic!("{rel} has no line {end}"));
    if std::env::var_os("BENCHRUN_BLESS").is_some() {
        std::fs::write(&path, format!("{head}{begin}\n{generated}\n{end}{tail}")).unwrap();
        return generated.to_string();
    }
    assert_eq!(
        current.trim(),
        generated.trim(),
        "{rel}'s reference differs from the schema: rerun with BENCHRUN_BLESS=1 \
         cargo test -p benchrun-api --test {test} and review the diff"
    );
    current.to_string()
}

/// Every field of every type of the document is named in `current` (the generator's own
/// completeness, checked independently of it).
pub fn every_field_named(doc: &Doc, schema: &Value, current: &str, rel: &str) {
    for name in types(doc, schema) {
        for field in def(doc, schema, &name)
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|p| p.keys())
        {
            assert!(
                current.contains(&format!("| `{field}` |")),
                "{name}.{field} is not in {rel}"
            );
        }
    }
}
