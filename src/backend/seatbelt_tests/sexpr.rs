//! A small reader for the s-expressions of a profile, and the queries the
//! checks and tests make of what it reads.

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Sx {
    Atom(String),
    /// `"..."`, unescaped.
    Str(String),
    /// `#"..."`, as written.
    Raw(String),
    List(Vec<Sx>),
}

/// Read every top-level form. Strings must be closed and may only use the
/// escapes `\\` and `\"`; parentheses must balance; comments run from `;`
/// to the end of the line.
pub(super) fn read_forms(text: &str) -> Result<Vec<Sx>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut stack: Vec<Vec<Sx>> = vec![Vec::new()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ';' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            c if c.is_whitespace() => i += 1,
            '(' => {
                stack.push(Vec::new());
                i += 1;
            }
            ')' => {
                if stack.len() < 2 {
                    return Err(format!("unbalanced `)` at {i}"));
                }
                let list = stack.pop().unwrap();
                stack.last_mut().unwrap().push(Sx::List(list));
                i += 1;
            }
            '"' => {
                let s = read_string(&chars, &mut i)?;
                stack.last_mut().unwrap().push(Sx::Str(s));
            }
            '#' if chars.get(i + 1) == Some(&'"') => {
                let raw = read_raw(&chars, &mut i)?;
                stack.last_mut().unwrap().push(Sx::Raw(raw));
            }
            _ => {
                let atom = read_atom(&chars, &mut i);
                stack.last_mut().unwrap().push(Sx::Atom(atom));
            }
        }
    }
    if stack.len() != 1 {
        return Err("unclosed `(`".into());
    }
    Ok(stack.pop().unwrap())
}

/// The string whose `"` is at `*i`, unescaped; `*i` moves past its end.
fn read_string(chars: &[char], i: &mut usize) -> Result<String, String> {
    *i += 1;
    let mut s = String::new();
    loop {
        let Some(&c) = chars.get(*i) else {
            return Err("unclosed string".into());
        };
        *i += 1;
        match c {
            '"' => break,
            '\\' => match chars.get(*i) {
                Some(&e @ ('\\' | '"')) => {
                    s.push(e);
                    *i += 1;
                }
                other => return Err(format!("escape \\{other:?} in a string")),
            },
            c if c.is_control() => return Err(format!("control character {c:?} in a string")),
            c => s.push(c),
        }
    }
    Ok(s)
}

/// The regex literal whose `#` is at `*i`, as written; `*i` moves past its end.
fn read_raw(chars: &[char], i: &mut usize) -> Result<String, String> {
    *i += 2;
    let start = *i;
    while *i < chars.len() && chars[*i] != '"' {
        if chars[*i].is_control() {
            return Err("control character in a regex literal".into());
        }
        *i += 1;
    }
    if *i == chars.len() {
        return Err("unclosed regex literal".into());
    }
    let raw: String = chars[start..*i].iter().collect();
    *i += 1;
    Ok(raw)
}

/// The atom that starts at `*i`; `*i` moves past its end.
fn read_atom(chars: &[char], i: &mut usize) -> String {
    let start = *i;
    while *i < chars.len()
        && !chars[*i].is_whitespace()
        && !matches!(chars[*i], '(' | ')' | '"' | ';')
    {
        *i += 1;
    }
    chars[start..*i].iter().collect()
}

impl Sx {
    pub(super) fn list(&self) -> &[Sx] {
        match self {
            Sx::List(l) => l,
            _ => &[],
        }
    }
    pub(super) fn atom(&self) -> Option<&str> {
        match self {
            Sx::Atom(a) => Some(a),
            _ => None,
        }
    }
    /// `allow`/`deny` of a top-level rule.
    pub(super) fn head(&self) -> &str {
        self.list().first().and_then(Sx::atom).unwrap_or("")
    }
    /// The operation names of a rule.
    pub(super) fn ops(&self) -> Vec<&str> {
        self.list().iter().skip(1).map_while(Sx::atom).collect()
    }
    /// The filters of a rule.
    pub(super) fn filters(&self) -> Vec<&Sx> {
        self.list()
            .iter()
            .skip(1)
            .skip_while(|s| s.atom().is_some())
            .collect()
    }
    /// Every string and regex literal inside, at any depth.
    pub(super) fn texts(&self) -> Vec<String> {
        match self {
            Sx::Atom(_) => Vec::new(),
            Sx::Str(s) | Sx::Raw(s) => vec![s.clone()],
            Sx::List(l) => l.iter().flat_map(Sx::texts).collect(),
        }
    }
    pub(super) fn raws(&self) -> Vec<String> {
        match self {
            Sx::Raw(s) => vec![s.clone()],
            Sx::List(l) => l.iter().flat_map(Sx::raws).collect(),
            _ => Vec::new(),
        }
    }
    pub(super) fn params(&self) -> Vec<String> {
        match self.list() {
            [Sx::Atom(a), Sx::Str(name)] if a == "param" => vec![name.clone()],
            l => l.iter().flat_map(Sx::params).collect(),
        }
    }
}

/// The value of a path expression: a string, `(param "X")` or
/// `(string-append ...)` of those.
pub(super) fn eval(sx: &Sx, params: &[(String, String)]) -> Option<String> {
    match sx {
        Sx::Str(s) => Some(s.clone()),
        Sx::List(l) => match l.as_slice() {
            [Sx::Atom(a), Sx::Str(name)] if a == "param" => params
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone()),
            [Sx::Atom(a), rest @ ..] if a == "string-append" => {
                rest.iter().map(|s| eval(s, params)).collect()
            }
            _ => None,
        },
        _ => None,
    }
}

/// `(literal X)`/`(subpath X)` filters of a rule, evaluated: `(kind, path)`.
pub(super) fn path_filters(rule: &Sx, params: &[(String, String)]) -> Vec<(String, String)> {
    rule.filters()
        .iter()
        .filter_map(|f| match f.list() {
            [Sx::Atom(kind), arg] if kind == "literal" || kind == "subpath" => {
                Some((kind.clone(), eval(arg, params)?))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn reader_rejects_broken_text() {
    for bad in ["(a", "a)", "(a \"b)", "(a \"b\\n\")", "(a #\"x)", "\"\\q\""] {
        assert!(read_forms(bad).is_err(), "{bad}");
    }
    assert!(read_forms("(a ; ) comment\n b)").is_ok());
}
