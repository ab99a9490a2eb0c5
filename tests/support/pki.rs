//! Test certificates: a CA, server certificates for `localhost`/127.0.0.1,
//! client certificates, an expired one and one from another CA.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};

pub(crate) struct Ca {
    pub issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, in PEM.
#[derive(Clone)]
pub(crate) struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub(crate) fn new(name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("ca key");
        Ca {
            issuer: CertifiedIssuer::self_signed(p, key).expect("self-signed ca"),
        }
    }

    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A server certificate for `names` (DNS names or IP addresses).
    pub(crate) fn server(&self, names: &[&str]) -> Leaf {
        self.leaf(names, ExtendedKeyUsagePurpose::ServerAuth, false)
    }

    /// A server certificate that expired in 2001.
    pub(crate) fn expired_server(&self, names: &[&str]) -> Leaf {
        self.leaf(names, ExtendedKeyUsagePurpose::ServerAuth, true)
    }

    /// A certificate usable both as server and client (etcd members).
    pub(crate) fn peer(&self, names: &[&str]) -> Leaf {
        let mut p =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("params");
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("peer"));
        let key = KeyPair::generate().expect("key");
        let c = p.signed_by(&key, &self.issuer).expect("sign");
        Leaf {
            cert_pem: c.pem(),
            key_pem: key.serialize_pem(),
        }
    }

    pub(crate) fn client(&self, cn: &str) -> Leaf {
        self.leaf(&[cn], ExtendedKeyUsagePurpose::ClientAuth, false)
    }

    fn leaf(&self, names: &[&str], eku: ExtendedKeyUsagePurpose, expired: bool) -> Leaf {
        let mut p =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>()).expect("params");
        p.extended_key_usages = vec![eku];
        p.distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("leaf"));
        if expired {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().expect("key");
        let c = p.signed_by(&key, &self.issuer).expect("sign");
        Leaf {
            cert_pem: c.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

/// Writes `text` to `dir/name` and returns the path.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write test file");
    p
}
