//! The generated documents agree with the code they describe.

use super::keys::*;
use super::*;
use crate::config::{self, BannerMode, EnvMode, NetworkMode, SandboxTable, Source, UnixSockets};
use serde::de::{self, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// A deserializer that only records the field or variant names a type
/// asks for, so the tests can list what `SandboxTable` accepts.
struct Names<'a>(&'a mut &'static [&'static str]);

impl<'de> de::Deserializer<'de> for Names<'_> {
    type Error = de::value::Error;
    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("names only"))
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = fields;
        Err(de::Error::custom("names only"))
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        *self.0 = variants;
        Err(de::Error::custom("names only"))
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
        byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
        identifier ignored_any
    }
}

fn names<T: for<'de> Deserialize<'de>>() -> Vec<&'static str> {
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(Names(&mut names));
    assert!(!names.is_empty(), "no names recorded");
    names.to_vec()
}

fn key(name: &str) -> &'static Key {
    KEYS.iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("{name} is not documented"))
}

fn parse(text: &str) -> anyhow::Result<config::Layer> {
    config::parse(Source::Default, text)
}

#[test]
fn documented_keys_are_the_keys_sandbox_table_accepts() {
    let mut accepted = names::<SandboxTable>();
    let mut documented: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
    accepted.sort_unstable();
    documented.sort_unstable();
    assert_eq!(
        accepted, documented,
        "a [sandbox] key was added or removed: describe it in generate::KEYS (man page, \
schema), the README's table, then regenerate with SBX_BLESS=1"
    );
}

#[test]
fn documented_enums_are_the_values_config_accepts() {
    fn check(name: &str, mut accepted: Vec<&'static str>) {
        let Type::Enum(documented) = key(name).ty else {
            panic!("{name} is not documented as an enum")
        };
        let mut documented = documented.to_vec();
        documented.sort_unstable();
        accepted.sort_unstable();
        assert_eq!(documented, accepted, "{name}");
    }
    check("network", names::<NetworkMode>());
    check("unix_sockets", names::<UnixSockets>());
    check("env", names::<EnvMode>());
    check("banner", names::<BannerMode>());
}

#[test]
fn every_default_and_example_loads() {
    for k in KEYS {
        let mut values = vec![k.example];
        values.extend(k.default);
        if let Type::Enum(all) = k.ty {
            let quoted: Vec<String> = all.iter().map(|v| format!("\"{v}\"")).collect();
            for q in quoted {
                parse(&format!("[sandbox]\n{} = {q}\n", k.name))
                    .unwrap_or_else(|e| panic!("{}: {e}", k.name));
            }
        }
        for v in values {
            parse(&format!("[sandbox]\n{} = {v}\n", k.name))
                .unwrap_or_else(|e| panic!("{} = {v}: {e}", k.name));
        }
    }
}

#[test]
fn a_file_with_every_schema_key_loads() {
    let schema: Value = serde_json::from_str(&schema().unwrap()).unwrap();
    let props = schema["properties"]["sandbox"]["properties"]
        .as_object()
        .unwrap();
    let mut text = String::from("[sandbox]\n");
    for name in props.keys() {
        text += &format!("{name} = {}\n", key(name).example);
    }
    let layer = parse(&text).unwrap();
    let t = layer.table;
    // Every field was set, so none of them is missing from the schema.
    let set = [
        t.enabled.is_some(),
        t.require.is_some(),
        t.filesystem.is_some(),
        t.writable.is_some(),
        t.deny_read.is_some(),
        t.deny_write.is_some(),
        t.network.is_some(),
        t.network_allowlist.is_some(),
        t.allow_unsandboxed.is_some(),
        t.unix_sockets.is_some(),
        t.env.is_some(),
        t.env_passthrough.is_some(),
        t.shell.is_some(),
        t.banner.is_some(),
        t.bwrap.is_some(),
        t.backend.is_some(),
    ];
    assert!(set.iter().all(|s| *s), "{text}");
    assert_eq!(props.len(), names::<SandboxTable>().len());
}

#[test]
fn schema_entries_have_type_and_description() {
    let schema: Value = serde_json::from_str(&schema().unwrap()).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let sandbox = &schema["properties"]["sandbox"];
    assert_eq!(sandbox["additionalProperties"], false);
    for (name, prop) in sandbox["properties"].as_object().unwrap() {
        assert!(prop.get("type").is_some(), "{name}");
        assert!(prop["description"].as_str().is_some(), "{name}");
        assert_eq!(
            prop.get("default").is_some(),
            key(name).default.is_some(),
            "{name}"
        );
    }
}

#[test]
fn documented_credential_variables_are_removed() {
    use crate::policy::is_credential_var;
    for suffix in CREDENTIAL_VAR_SUFFIXES {
        assert!(is_credential_var(&format!("MY{suffix}")), "{suffix}");
    }
    for part in CREDENTIAL_VAR_PARTS {
        assert!(is_credential_var(&format!("A{part}B")), "{part}");
    }
    for name in CREDENTIAL_VAR_NAMES {
        assert!(is_credential_var(name), "{name}");
    }
    assert!(!is_credential_var("PATH") && !is_credential_var("HOME"));
    assert!(crate::policy::is_credential_env(
        "DATABASE_URL",
        "postgres://u:p@host/db"
    ));
}

#[test]
fn man_pages_render() {
    let page = man().unwrap();
    assert!(page.starts_with(".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH sbx 1 \"\" "));
    assert_eq!(page.matches(".ds Aq \\(aq").count(), 1, "one preamble");
    for section in [
        ".SH NAME",
        ".SH SYNOPSIS",
        ".SH DESCRIPTION",
        ".SH OPTIONS",
        ".SH SUBCOMMANDS",
        ".SH \"SHELL MODE\"",
        ".SH \"EXIT STATUS\"",
        ".SH ENVIRONMENT",
        ".SH FILES",
        ".SH SECURITY",
        ".SH VERSION",
    ] {
        assert!(page.contains(section), "{section}");
    }
    assert!(!page.contains("sbx\\-run(1)"), "no page of its own");
    let page = config_man().unwrap();
    for k in KEYS {
        assert!(page.contains(&format!("\\fB{}\\fR = ", k.name.replace('-', "\\-"))));
    }
}
