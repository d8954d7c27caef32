//! The Unix sockets that listen in this process's network namespace, as the
//! kernel's socket-diagnostics netlink interface (`NETLINK_SOCK_DIAG`, the
//! one `ss -x` reads) reports them: each with its socket inode, the file it
//! is bound to (device and inode) or its abstract name.
//!
//! Only safe netlink calls and byte parsing: the request and the replies
//! are the fixed layouts of `<linux/sock_diag.h>` and `<linux/unix_diag.h>`.

use std::io;

use nix::sys::socket::{
    recv, sendto, socket, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType,
};

/// `SOCK_DIAG_BY_FAMILY`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
/// `UDIAG_SHOW_NAME | UDIAG_SHOW_VFS`.
const SHOW: u32 = 0x1 | 0x2;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_VFS: u16 = 1;
/// `1 << TCP_LISTEN`: a stream or seqpacket socket can only connect to a
/// listening one.
const LISTENING: u32 = 1 << 10;

/// One listening Unix socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listening {
    /// Its inode in the socket file system (`socket:[N]` in `/proc/PID/fd`).
    pub socket: u32,
    /// The file it is bound to: the kernel's device number (major in the
    /// bits above 20, minor below) and the inode's low 32 bits, which is
    /// all the interface reports.
    pub file: Option<(u32, u32)>,
    /// The address it is bound to (for an abstract one, starting with NUL).
    pub name: Option<Vec<u8>>,
}

/// Every listening Unix socket of this network namespace.
pub fn listening() -> io::Result<Vec<Listening>> {
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )?;
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    sendto(raw, &request(), &NetlinkAddr::new(0, 0), MsgFlags::empty())?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let n = recv(raw, &mut buf, MsgFlags::empty())?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        if parse(&buf[..n], &mut out)? {
            return Ok(out);
        }
    }
}

/// The dump request: every listening AF_UNIX socket, with its name and
/// its file.
fn request() -> Vec<u8> {
    let mut r = Vec::with_capacity(40);
    r.extend_from_slice(&40u32.to_ne_bytes()); // nlmsg_len
    r.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
    r.extend_from_slice(&1u32.to_ne_bytes()); // seq
    r.extend_from_slice(&0u32.to_ne_bytes()); // pid
    r.push(nix::libc::AF_UNIX as u8); // sdiag_family
    r.push(0); // sdiag_protocol
    r.extend_from_slice(&0u16.to_ne_bytes()); // pad
    r.extend_from_slice(&LISTENING.to_ne_bytes()); // udiag_states
    r.extend_from_slice(&0u32.to_ne_bytes()); // udiag_ino
    r.extend_from_slice(&SHOW.to_ne_bytes()); // udiag_show
    r.extend_from_slice(&u32::MAX.to_ne_bytes()); // cookie (none)
    r.extend_from_slice(&u32::MAX.to_ne_bytes());
    r
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn malformed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "malformed sock_diag reply")
}

/// Parse one datagram of replies into `out`; whether the dump is done.
fn parse(mut b: &[u8], out: &mut Vec<Listening>) -> io::Result<bool> {
    while b.len() >= 16 {
        let len = u32_at(b, 0).ok_or_else(malformed)? as usize;
        let kind = u16_at(b, 4).ok_or_else(malformed)?;
        if len < 16 || len > b.len() {
            return Err(malformed());
        }
        let body = &b[16..len];
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = u32_at(body, 0).ok_or_else(malformed)? as i32;
                return Err(io::Error::from_raw_os_error(-code));
            }
            SOCK_DIAG_BY_FAMILY => out.push(socket_of(body).ok_or_else(malformed)?),
            _ => {}
        }
        // Messages are 4-byte aligned.
        let next = (len + 3) & !3;
        b = b.get(next..).unwrap_or_default();
    }
    Ok(false)
}

/// A `unix_diag_msg` and its attributes.
fn socket_of(body: &[u8]) -> Option<Listening> {
    // family, type, state, pad: 4 bytes; then the inode; then the cookie.
    let socket = u32_at(body, 4)?;
    let mut found = Listening {
        socket,
        file: None,
        name: None,
    };
    let mut attrs = body.get(16..)?;
    while attrs.len() >= 4 {
        let len = usize::from(u16_at(attrs, 0)?);
        let kind = u16_at(attrs, 2)?;
        if len < 4 || len > attrs.len() {
            return None;
        }
        let data = &attrs[4..len];
        match kind {
            UNIX_DIAG_VFS => found.file = Some((u32_at(data, 4)?, u32_at(data, 0)?)),
            UNIX_DIAG_NAME => found.name = Some(data.to_vec()),
            _ => {}
        }
        let next = (len + 3) & !3;
        attrs = attrs.get(next..).unwrap_or_default();
    }
    Some(found)
}

/// Whether `file` (a device number as `stat` gives it, an inode) is the
/// file that the reported `(dev, ino)` names: the kernel's device number
/// packs the major above bit 20, `stat`'s does not.
pub fn same_file(reported: (u32, u32), dev: u64, ino: u64) -> bool {
    let (kdev, kino) = reported;
    let (major, minor) = (u64::from(kdev >> 20), u64::from(kdev & 0xf_ffff));
    major == nix::sys::stat::major(dev) && minor == nix::sys::stat::minor(dev) && kino == ino as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_listening_socket_is_found_with_its_file_and_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        let all = listening().unwrap();
        let mine: Vec<&Listening> = all
            .iter()
            .filter(|l| l.file.is_some_and(|f| same_file(f, meta.dev(), meta.ino())))
            .collect();
        assert_eq!(mine.len(), 1, "{all:?}");
        // A path as bound: with its terminating NUL.
        let mut bound = path.as_os_str().as_encoded_bytes().to_vec();
        bound.push(0);
        assert_eq!(mine[0].name.as_deref(), Some(bound.as_slice()));
        // Its socket inode is the one /proc names.
        let inode = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .any(|l| l.to_string_lossy() == format!("socket:[{}]", mine[0].socket));
        assert!(inode);
    }

    #[test]
    fn replies_are_parsed_and_bad_ones_refused() {
        // One socket with a name attribute ("@x") and a file attribute.
        let mut body = vec![1, 1, 10, 0];
        body.extend_from_slice(&77u32.to_ne_bytes());
        body.extend_from_slice(&[0; 8]);
        body.extend_from_slice(&6u16.to_ne_bytes());
        body.extend_from_slice(&UNIX_DIAG_NAME.to_ne_bytes());
        body.extend_from_slice(&[0, b'x', 0, 0]);
        body.extend_from_slice(&12u16.to_ne_bytes());
        body.extend_from_slice(&UNIX_DIAG_VFS.to_ne_bytes());
        body.extend_from_slice(&9u32.to_ne_bytes());
        body.extend_from_slice(&((8u32 << 20) | 1).to_ne_bytes());
        let mut msg = Vec::new();
        msg.extend_from_slice(&(16 + body.len() as u32).to_ne_bytes());
        msg.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        msg.extend_from_slice(&[0; 10]);
        msg.extend_from_slice(&body);
        let mut done = vec![0u8; 20];
        done[..4].copy_from_slice(&20u32.to_ne_bytes());
        done[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        msg.extend_from_slice(&done);
        let mut out = Vec::new();
        assert!(parse(&msg, &mut out).unwrap());
        assert_eq!(
            out,
            [Listening {
                socket: 77,
                file: Some(((8 << 20) | 1, 9)),
                name: Some(vec![0, b'x']),
            }]
        );
        assert!(same_file(
            ((8 << 20) | 1, 9),
            nix::sys::stat::makedev(8, 1),
            9
        ));
        assert!(!same_file(
            ((8 << 20) | 1, 9),
            nix::sys::stat::makedev(8, 2),
            9
        ));
        // A length past the end is refused, never read past.
        let mut bad = msg.clone();
        bad[..4].copy_from_slice(&4096u32.to_ne_bytes());
        assert!(parse(&bad, &mut Vec::new()).is_err());
    }
}
