//! Just enough TLS to read the server name from a ClientHello.

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Hello {
    More,
    Done(Option<String>),
    Bad(&'static str),
}

/// Reassemble the first handshake message from TLS records and extract the
/// `server_name` (RFC 6066) of a ClientHello.
pub(super) fn parse_client_hello(data: &[u8]) -> Hello {
    let mut msg = Vec::new();
    let mut at = 0;
    loop {
        if !msg.is_empty() && msg[0] != 1 {
            return Hello::Bad("TLS handshake does not start with a ClientHello");
        }
        if msg.len() >= 4 {
            let need = 4 + ((msg[1] as usize) << 16 | (msg[2] as usize) << 8 | msg[3] as usize);
            if msg.len() >= need {
                return match hello_server_name(&msg[4..need]) {
                    Some(name) => Hello::Done(name),
                    None => Hello::Bad("malformed TLS ClientHello"),
                };
            }
        }
        let Some(header) = data.get(at..at + 5) else {
            return Hello::More;
        };
        if header[0] != 0x16 || header[1] != 3 {
            return Hello::Bad("TLS record is not a handshake");
        }
        let len = (header[3] as usize) << 8 | header[4] as usize;
        if len == 0 || len > 16 * 1024 {
            return Hello::Bad("bad TLS record length");
        }
        let Some(fragment) = data.get(at + 5..at + 5 + len) else {
            return Hello::More;
        };
        msg.extend_from_slice(fragment);
        at += 5 + len;
    }
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| b[0] as usize)
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| (b[0] as usize) << 8 | b[1] as usize)
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// `Some(None)`: a well-formed ClientHello without a host name.
fn hello_server_name(body: &[u8]) -> Option<Option<String>> {
    let mut c = Cursor(body);
    c.take(2 + 32)?; // legacy_version, random
    c.vec8()?; // session id
    c.vec16()?; // cipher suites
    c.vec8()?; // compression methods
    if c.0.is_empty() {
        return Some(None);
    }
    let mut exts = Cursor(c.vec16()?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        if kind != 0 {
            continue;
        }
        let mut list = Cursor(Cursor(data).vec16()?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?;
            if name_type == 0 {
                return std::str::from_utf8(name).ok().map(|s| Some(s.to_string()));
            }
        }
        return Some(None);
    }
    Some(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::test_support::client_hello;

    #[test]
    fn client_hello_server_name_is_extracted() {
        let hello = client_hello(Some("Example.com"));
        assert_eq!(
            parse_client_hello(&hello),
            Hello::Done(Some("Example.com".into()))
        );
        assert_eq!(parse_client_hello(&client_hello(None)), Hello::Done(None));
        for cut in [1, 5, 20, hello.len() - 1] {
            assert_eq!(parse_client_hello(&hello[..cut]), Hello::More, "{cut}");
        }
        // The same handshake split over two records.
        let hs = &hello[5..];
        let (a, b) = hs.split_at(10);
        let mut two = vec![0x16, 3, 1, 0, a.len() as u8];
        two.extend(a);
        two.extend([0x16, 3, 1, 0, b.len() as u8]);
        two.extend(b);
        assert_eq!(
            parse_client_hello(&two),
            Hello::Done(Some("Example.com".into()))
        );
        assert!(matches!(
            parse_client_hello(b"\x17\x03\x01\x00\x05hello"),
            Hello::Bad(_)
        ));
        assert!(matches!(
            parse_client_hello(b"\x16\x03\x01\x00\x04\x02\x00\x00\x00"),
            Hello::Bad(_)
        ));
    }
}
