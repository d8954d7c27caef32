//! The per-run credential: `Proxy-Authorization: Basic base64(sbx:TOKEN)`.

use std::io::{self, Read};

use super::PROXY_USER;

/// A fresh random token (32 hex digits from the kernel's CSPRNG); safe to put
/// in a URL's user info unescaped.
pub fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `base64("sbx:TOKEN")`, the credential part of `Proxy-Authorization`
/// (clients inside the sandbox send it from the proxy URL's user part).
#[cfg(test)]
pub fn credential(token: &str) -> String {
    base64_encode(format!("{PROXY_USER}:{token}").as_bytes())
}

/// `Proxy-Authorization: Basic base64(sbx:TOKEN)`, exactly once.
pub(super) fn authorized(headers: &[httparse::Header], token: &str) -> bool {
    let mut values = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("proxy-authorization"));
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(value) = std::str::from_utf8(value.value) else {
        return false;
    };
    let value = value.trim_matches([' ', '\t']);
    let Some((scheme, cred)) = value.split_once([' ', '\t']) else {
        return false;
    };
    if token.is_empty() || !scheme.eq_ignore_ascii_case("basic") {
        return false;
    }
    let Some(decoded) = base64_decode(cred.trim_matches([' ', '\t'])) else {
        return false;
    };
    let expected = format!("{PROXY_USER}:{token}");
    constant_time_eq(&decoded, expected.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

// Base64 (standard alphabet), for the credential only.

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(super) fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let pad = s.iter().rev().take_while(|&&b| b == b'=').count();
    if pad > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in &s[..s.len() - pad] {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_credentials() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"sbx:abc"), "c2J4OmFiYw==");
        for s in ["", "f", "fo", "foo", "foob", "sbx:0123456789abcdef"] {
            assert_eq!(
                base64_decode(&base64_encode(s.as_bytes())).unwrap(),
                s.as_bytes()
            );
        }
        assert!(base64_decode("Zg=").is_none());
        assert!(base64_decode("Z===").is_none());
        assert!(base64_decode("Zm9v!").is_none());

        let ok = format!("Basic {}", credential("tok"));
        let check = |values: &[&str]| {
            let hs: Vec<httparse::Header> = values
                .iter()
                .map(|v| httparse::Header {
                    name: "Proxy-Authorization",
                    value: v.as_bytes(),
                })
                .collect();
            authorized(&hs, "tok")
        };
        assert!(check(&[&ok]));
        assert!(check(&[&format!("basic  {}", credential("tok"))]));
        assert!(!check(&[]));
        assert!(!check(&[&ok, &ok]));
        assert!(!check(&[&format!("Basic {}", credential("tok2"))]));
        assert!(!check(&[&format!("Basic {}", base64_encode(b"root:tok"))]));
        assert!(!check(&[&format!("Bearer {}", credential("tok"))]));
        assert!(!check(&["Basic"]));
        let hs = [httparse::Header {
            name: "Proxy-Authorization",
            value: ok.as_bytes(),
        }];
        assert!(!authorized(&hs, ""), "an empty token must never authorise");

        let token = random_token().unwrap();
        assert_eq!(token.len(), 32);
        assert_ne!(token, random_token().unwrap());
    }
}
