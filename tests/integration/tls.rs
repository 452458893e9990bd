//! rediss://: a server with a private CA, with and without client certificates.

use crate::fixtures::*;

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
