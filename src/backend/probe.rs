//! Telling a protocol mismatch from a dead server, after a first contact failed.
//!
//! The two mistakes look like other failures from the inside. A `rediss://` URL aimed at a
//! plain-text Redis sends a TLS ClientHello that Redis reads as the start of an inline command:
//! it waits for the end of the line and says nothing, so the handshake just times out, as with a
//! stopped server. A `redis://` URL aimed at a TLS port sends a command that the TLS library
//! rejects by resetting the connection, as a crashing server would. One short look with the
//! other protocol tells them apart: a plain-text Redis answers `PING` with `+PONG` (or a
//! `-NOAUTH`/`-DENIED` error, still plain text), and a TLS server answers a ClientHello with a
//! TLS record. Each probe is one connection, bounded by the caller's deadline, and runs only
//! when a first contact already failed.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether a plain-text Redis answers at `host:port` before `deadline`.
pub(super) fn plain_redis_answers(host: &str, port: u16, deadline: Instant) -> bool {
    let Some(mut stream) = connect(host, port, deadline) else {
        return false;
    };
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut first = [0u8; 1];
    matches!(read_some(&mut stream, &mut first, deadline), Some(1) if matches!(first[0], b'+' | b'-'))
}

/// Whether a TLS server answers a ClientHello at `host:port` before `deadline`.
pub(super) fn speaks_tls(host: &str, port: u16, deadline: Instant) -> bool {
    let Some(hello) = client_hello(host) else {
        return false;
    };
    let Some(mut stream) = connect(host, port, deadline) else {
        return false;
    };
    if stream.write_all(&hello).is_err() {
        return false;
    }
    // A TLS record starts with its content type (22: handshake, 21: alert) and version 3.x.
    let mut header = [0u8; 2];
    let mut got = 0;
    while got < header.len() {
        match read_some(&mut stream, &mut header[got..], deadline) {
            Some(n) if n > 0 => got += n,
            _ => return false,
        }
    }
    matches!(header, [22 | 21, 3])
}

/// The bytes of a TLS ClientHello for `host` (never completed: the probe only reads the
/// server's first record, so the certificate is never looked at).
fn client_hello(host: &str) -> Option<Vec<u8>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).ok()?;
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).ok()?;
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).ok()?;
    }
    Some(hello)
}

fn connect(host: &str, port: u16, deadline: Instant) -> Option<TcpStream> {
    let addr = (host, port).to_socket_addrs().ok()?.next()?;
    let left = left(deadline)?;
    let stream = TcpStream::connect_timeout(&addr, left).ok()?;
    stream.set_write_timeout(Some(left)).ok()?;
    Some(stream)
}

fn read_some(stream: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Option<usize> {
    stream.set_read_timeout(Some(left(deadline)?)).ok()?;
    stream.read(buf).ok()
}

/// Time left before `deadline` (None when none is: a zero timeout means "forever" to sockets).
fn left(deadline: Instant) -> Option<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    (!left.is_zero()).then_some(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_hello_is_a_tls_handshake_record() {
        let hello = client_hello("localhost").unwrap();
        assert_eq!(&hello[..2], &[22, 3]);
        assert!(client_hello("127.0.0.1").is_some());
    }

    #[test]
    fn probes_of_a_closed_port_say_no_quickly() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let deadline = Instant::now() + Duration::from_secs(2);
        assert!(!plain_redis_answers("127.0.0.1", port, deadline));
        assert!(!speaks_tls("127.0.0.1", port, deadline));
        assert!(Instant::now() < deadline);
    }
}
