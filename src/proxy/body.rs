//! Request bodies: their framing, read from the headers, and forwarding
//! exactly the declared body.

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};

use super::listener::Stream;
use super::plain::Plain;
use super::COPY_BUF;

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    Empty,
    Length(u64),
    Chunked,
}

pub(super) fn body_framing(req: &Plain) -> Result<Body, (u16, &'static str)> {
    let values = |name: &str| -> Vec<String> {
        req.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
            .collect()
    };
    let te = values("transfer-encoding");
    let cl = values("content-length");
    if !te.is_empty() {
        if !cl.is_empty() {
            return Err((400, "both Transfer-Encoding and Content-Length"));
        }
        if req.version == 0 {
            return Err((400, "Transfer-Encoding in an HTTP/1.0 request"));
        }
        if te.len() != 1 || te[0] != "chunked" {
            return Err((501, "only Transfer-Encoding: chunked is supported"));
        }
        return Ok(Body::Chunked);
    }
    let Some(first) = cl.first() else {
        return Ok(Body::Empty);
    };
    let valid =
        |v: &String| !v.is_empty() && v.len() <= 18 && v.bytes().all(|b| b.is_ascii_digit());
    if !cl.iter().all(|v| valid(v) && v == first) {
        return Err((400, "bad Content-Length"));
    }
    match first.parse::<u64>() {
        Ok(0) => Ok(Body::Empty),
        Ok(n) => Ok(Body::Length(n)),
        Err(_) => Err((400, "bad Content-Length")),
    }
}

/// Forward exactly the declared body; bytes after it are dropped.
pub(super) fn send_body<S: Stream>(
    mut client: S,
    mut upstream: TcpStream,
    early: Vec<u8>,
    body: Body,
) {
    let mut chunked = Chunked::default();
    let mut remaining = match body {
        Body::Length(n) => n,
        _ => 0,
    };
    // Returns how much of `data` belongs to the body, and whether it ended.
    let mut take = |data: &[u8]| -> Result<(usize, bool), ()> {
        match body {
            Body::Empty => Ok((0, true)),
            Body::Length(_) => {
                let n = data
                    .len()
                    .min(usize::try_from(remaining).unwrap_or(usize::MAX));
                remaining -= n as u64;
                Ok((n, remaining == 0))
            }
            Body::Chunked => chunked.feed(data).map(|n| (n, chunked.done())),
        }
    };
    let mut buf = vec![0u8; COPY_BUF];
    let mut early = Some(early).filter(|e| !e.is_empty());
    loop {
        let owned;
        let data: &[u8] = match early.take() {
            Some(e) => {
                owned = e;
                &owned
            }
            None => match client.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => &buf[..n],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            },
        };
        let Ok((n, done)) = take(data) else {
            break;
        };
        if upstream.write_all(&data[..n]).is_err() {
            break;
        }
        if done {
            return;
        }
    }
    // The body ended early or was malformed: the request cannot complete.
    let _ = upstream.shutdown(Shutdown::Both);
    let _ = client.shut(Shutdown::Both);
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    #[default]
    SizeStart,
    Size,
    Ext,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    Trailer,
    TrailerLf,
    FinalLf,
    Done,
}

/// A strict scanner for a chunked body (RFC 9112 §7.1) that passes bytes
/// through unchanged and says where the body ends. Bare LFs, whitespace in
/// sizes and oversized lines are refused: they are how request smuggling
/// starts.
#[derive(Debug, Default)]
struct Chunked {
    state: ChunkState,
    size: u64,
    digits: usize,
    line: usize,
}

impl Chunked {
    fn done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consume from `data`; returns how many bytes belong to the body (all of
    /// them unless the body ends inside `data`).
    fn feed(&mut self, data: &[u8]) -> Result<usize, ()> {
        use ChunkState::*;
        let mut i = 0;
        while i < data.len() && self.state != Done {
            if self.state == Data {
                let n = (data.len() - i).min(usize::try_from(self.size).unwrap_or(usize::MAX));
                self.size -= n as u64;
                i += n;
                if self.size == 0 {
                    self.state = DataCr;
                }
                continue;
            }
            let b = data[i];
            i += 1;
            self.line += 1;
            if self.line > 4096 {
                return Err(());
            }
            self.state = match (self.state, b) {
                (SizeStart | Size, b) if b.is_ascii_hexdigit() => {
                    self.digits += 1;
                    if self.digits > 15 {
                        return Err(());
                    }
                    let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                    self.size = self.size * 16 + d;
                    Size
                }
                (Size, b';') => Ext,
                (Size | Ext, b'\r') => SizeLf,
                (Ext, b) if b == b'\t' || (b' '..0x7f).contains(&b) || b >= 0x80 => Ext,
                (SizeLf, b'\n') => {
                    self.line = 0;
                    self.digits = 0;
                    if self.size == 0 {
                        TrailerStart
                    } else {
                        Data
                    }
                }
                (DataCr, b'\r') => DataLf,
                (DataLf, b'\n') => {
                    self.line = 0;
                    SizeStart
                }
                (TrailerStart, b'\r') => FinalLf,
                (Trailer, b'\r') => TrailerLf,
                (TrailerStart | Trailer, b)
                    if b == b'\t' || (b' '..0x7f).contains(&b) || b >= 0x80 =>
                {
                    Trailer
                }
                (TrailerLf, b'\n') => {
                    self.line = 0;
                    TrailerStart
                }
                (FinalLf, b'\n') => Done,
                _ => return Err(()),
            };
        }
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_end_where_their_framing_says() {
        let body =
            b"5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nTrailer: x\r\n\r\nGET /smuggled HTTP/1.1\r\n";
        let mut c = Chunked::default();
        let n = c.feed(body).unwrap();
        assert!(c.done());
        assert!(body[..n].ends_with(b"Trailer: x\r\n\r\n"));
        // Byte by byte gives the same answer.
        let mut c = Chunked::default();
        let mut total = 0;
        for b in body.iter() {
            if c.done() {
                break;
            }
            total += c.feed(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(total, n);
        for bad in [
            &b"5\nhello\r\n0\r\n\r\n"[..],
            b"5 \r\nhello\r\n0\r\n\r\n",
            b"-5\r\n",
            b"5\r\nhelloX\r\n",
            b"0\r\n\n",
            b"10000000000000000\r\n",
            b"\r\n",
        ] {
            let mut c = Chunked::default();
            assert!(c.feed(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
