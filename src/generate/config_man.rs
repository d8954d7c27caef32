//! The man page sbx.toml(5).

use anyhow::Result;
use roff::{bold, italic, roman, Roff};

use super::keys::*;
use super::*;

// -------------------------------------------------------------- sbx.toml(5)

fn type_text(ty: Type) -> String {
    match ty {
        Type::Bool => "true | false".into(),
        Type::Enum(values) => values
            .iter()
            .map(|v| format!("\"{v}\""))
            .collect::<Vec<_>>()
            .join(" | "),
        Type::Filesystem => "true | false | \"read-only\"".into(),
        Type::Require => "true | false | \"reduced\"".into(),
        Type::Paths => "[paths]".into(),
        Type::Hosts => "[hosts]".into(),
        Type::VarNames => "[names]".into(),
        Type::AbsPath => "\"/absolute/path\"".into(),
        Type::Count => "number".into(),
        Type::Size => "bytes | \"SIZE\"".into(),
    }
}

/// The man page sbx.toml(5): the configuration file, in roff.
// Over the project's 80-line guide on purpose: the page's text, in order.
pub fn config_man() -> Result<String> {
    let mut r = Roff::new();
    r.control(
        "TH",
        ["sbx.toml", "5", NO_DATE, version().as_str(), "File Formats"],
    );
    sh(&mut r, "NAME");
    r.text([roman("sbx.toml - configuration file of sbx")]);

    sh(&mut r, "SYNOPSIS");
    r.text([
        bold("~/.config/sbx/config.toml"),
        roman(" (user file), "),
        italic("FILE"),
        roman(" given with "),
        bold("--config"),
        roman(" or "),
        bold("SBX_CONFIG"),
        roman(", "),
        bold(".sbx.toml"),
        roman(" (project file)"),
    ]);

    sh(&mut r, "DESCRIPTION");
    pp(
        &mut r,
        "sbx(1) reads its policy from a `[sandbox]` table in TOML. Other tables in the same file \
are ignored, so the section can live in another tool's configuration file; a key of the \
`[sandbox]` table written above every table belongs to no table, and is an error. sbx needs no \
file at all: every key is optional, and an absent key keeps the value of the layer below.",
    );
    pp(
        &mut r,
        "Unknown keys, wrong types and invalid values are errors: sbx prints one line naming the \
file, the line and the key, exits with status 125 and runs nothing. A typo can therefore never \
silently weaken, or strengthen, a policy.",
    );

    sh(&mut r, "PRECEDENCE");
    pp(&mut r, "Sources, lowest precedence first:");
    tp(&mut r, "1.", "The built-in defaults.");
    tp(
        &mut r,
        "2.",
        "The user file, `$XDG_CONFIG_HOME/sbx/config.toml` (default `~/.config/sbx/config.toml`).",
    );
    tp(
        &mut r,
        "3.",
        "`--config FILE`, else `$SBX_CONFIG`: trusted like the user file.",
    );
    tp(
        &mut r,
        "4.",
        "The project file `.sbx.toml`: the nearest one in the working directory or its \
ancestors, up to the project root. It can only narrow the policy (see PROJECT FILES).",
    );
    tp(
        &mut r,
        "5.",
        "Command-line flags: `--network` sets `network`; `--allow-domain HOST` adds to \
`network_allowlist` (and sets `network = \"allowlist\"` unless `--network` is given); \
`--writable PATH` adds to `writable` (relative to the working directory); `--read-only` sets \
`filesystem = \"read-only\"`; `--require` sets `require = true`; `--quiet` sets \
`banner = \"never\"`.",
    );
    pp(
        &mut r,
        "The project root is the nearest ancestor of the working directory that holds `.git`, but \
never the home directory or one of its ancestors, else the working directory itself; \
`--project DIR` overrides it. `sbx check` shows where each effective value came from.",
    );

    sh(&mut r, "KEYS");
    for key in KEYS {
        r.control("TP", []);
        r.text([bold(key.name), roman(" = "), italic(type_text(key.ty))]);
        r.text(md(key.meaning));
        r.control("IP", []);
        let default = match key.default {
            Some(d) => format!("`{d}`"),
            None => key.default_text.to_string(),
        };
        r.text(md(&format!(
            "Default: {default}. In a project file: {}",
            key.project
        )));
    }

    sh(&mut r, "PROJECT FILES");
    pp(
        &mut r,
        "A `.sbx.toml` comes with the code it sits in, and a sandboxed command may have written \
it, so sbx does not trust it: a value is taken only when it keeps the policy at least as strict \
as the layers below (the KEYS above say how for each key). A widening (turning the sandbox off, \
opening the network, adding a writable path, allowing unsandboxed runs, ...) is ignored with a \
warning that names the key and the file, on every run. `shell`, `banner` and `bwrap` are read \
from trusted files only. The project file is read-only inside the sandbox.",
    );

    sh(&mut r, "CHECKING A FILE");
    pp(
        &mut r,
        "`sbx check` loads every layer and prints the effective policy, where each value came \
from, and the warnings. For editors, `sbx.schema.json` in sbx's repository is a JSON Schema of \
this format (generated by `sbx man --schema`).",
    );

    sh(&mut r, "EXAMPLES");
    pp(
        &mut r,
        "A user file for an agent run around its client: its API key passes through, and the \
network reaches its API and two package registries only.",
    );
    example(
        &mut r,
        "[sandbox]\n\
env_passthrough = [\"ANTHROPIC_API_KEY\"]\n\
network = \"allowlist\"\n\
network_allowlist = [\"registry.npmjs.org\", \"*.crates.io\", \"api.anthropic.com\"]\n\
require = true",
    );
    pp(
        &mut r,
        "A project file that narrows: no network at all, only `target` and `/tmp` writable, and \
one more secret hidden.",
    );
    example(
        &mut r,
        "[sandbox]\n\
network = \"deny\"\n\
writable = [\"target\", \"/tmp\"]\n\
deny_read = [\"config/master.key\"]",
    );
    pp(
        &mut r,
        "The section inside another tool's configuration file, given with `--config`:",
    );
    example(
        &mut r,
        "[tool]\n\
name = \"other\"\n\
\n\
[sandbox]\n\
writable = [\".\", \"/tmp\", \"~/.cache/pip\"]",
    );

    sh(&mut r, "SEE ALSO");
    r.text(md("sbx(1)"));
    r.control("SH", ["VERSION"]);
    r.text([roman(format!("v{}", env!("CARGO_PKG_VERSION")))]);
    Ok(r.render())
}
