//! rediss://: a server with a private CA, with and without client certificates.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use crate::util::*;

pub struct Pki {
    pub dir: Scratch,
}

/// A CA, a server certificate for localhost/127.0.0.1, and a client certificate, as PEM files.
pub fn pki() -> Pki {
    let dir = Scratch::new();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Distinct names: a leaf whose subject equals its issuer's looks self-signed to OpenSSL.
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "distlock test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let write = |name: &str, text: String| std::fs::write(dir.path(name), text).unwrap();
    write("ca.crt", ca_cert.pem());
    for who in ["server", "client"] {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, who);
        let cert = params.signed_by(&key, &issuer).unwrap();
        write(&format!("{who}.crt"), cert.pem());
        write(&format!("{who}.key"), key.serialize_pem());
    }
    Pki { dir }
}

/// A server that speaks only TLS, with `pki`'s certificates; `auth_clients` (`yes` or `no`):
/// whether clients must show a certificate.
pub fn tls_redis(pki: &Pki, auth_clients: &str) -> Redis {
    Redis::options()
        .tls(pki)
        .args(&["--tls-auth-clients", auth_clients])
        .start()
}

#[test]
fn tls_with_a_private_ca() {
    let pki = pki();
    let redis = tls_redis(&pki, "no");
    let url = format!("rediss://localhost:{}", redis.port());
    let out = run(bare_distlock().args([
        "--redis",
        &url,
        "--tls-ca",
        &pki.dir.str("ca.crt"),
        "run",
        "-k",
        "t",
        "--",
        "echo",
        "over-tls",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "over-tls\n");
    // Without the CA, the certificate is not trusted: exit 69 with a TLS message, at once.
    let out = run(bare_distlock().args(["--redis", &url, "run", "-k", "t", "--", "true"]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(stderr(&out).contains("TLS failure"), "{}", stderr(&out));
    assert!(stderr(&out).contains("--tls-ca"), "{}", stderr(&out));
    // #insecure skips verification (test servers only).
    let out = run(bare_distlock().args([
        "--redis",
        &format!("{url}/#insecure"),
        "run",
        "-k",
        "t",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Plain text against the TLS port fails at once too, instead of retrying forever.
    let out = run(bare_distlock().args([
        "--redis",
        &format!("redis://127.0.0.1:{}", redis.port()),
        "run",
        "-k",
        "t",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
}

#[test]
fn mutual_tls() {
    let pki = pki();
    let redis = tls_redis(&pki, "yes");
    let url = format!("rediss://127.0.0.1:{}", redis.port());
    let ca = pki.dir.str("ca.crt");
    let out = run(bare_distlock().args([
        "--redis", &url, "--tls-ca", &ca, "run", "-k", "m", "--", "true",
    ]));
    assert_eq!(
        out.status.code(),
        Some(69),
        "a client without certificate is refused: {}",
        stderr(&out)
    );
    let out = run(bare_distlock()
        .env("DISTLOCK_TLS_CERT", pki.dir.path("client.crt"))
        .env("DISTLOCK_TLS_KEY", pki.dir.path("client.key"))
        .args([
            "--redis", &url, "--tls-ca", &ca, "run", "-k", "m", "--", "true",
        ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn tls_flags_need_rediss() {
    let out = run(bare_distlock().args([
        "--redis",
        "redis://127.0.0.1:1",
        "--tls-ca",
        "/etc/hostname",
        "run",
        "-k",
        "k",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("rediss://"));
    let out = run(bare_distlock().args([
        "--redis",
        "rediss://127.0.0.1:1",
        "--tls-cert",
        "/etc/hostname",
        "run",
        "-k",
        "k",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("go together"));
    let out = run(bare_distlock().args([
        "--redis",
        "rediss://127.0.0.1:1",
        "--tls-ca",
        "/nonexistent",
        "run",
        "-k",
        "k",
        "--",
        "true",
    ]));
    assert_eq!(out.status.code(), Some(64));
    assert!(stderr(&out).contains("cannot read --tls-ca"));
}
