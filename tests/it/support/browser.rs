//! A browser for the tests of the web's forms: the cookies the server
//! set sent back on every request, from a loopback address of its own
//! (so per-address limits can be told apart).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::*;

/// A browser: the cookies the server set, sent back on every request,
/// from one loopback address.
pub struct Browser {
    pub addr: SocketAddr,
    pub from: IpAddr,
    pub cookies: Vec<(String, String)>,
}

impl Browser {
    pub fn new(forge: &Forge) -> Browser {
        Browser::at(forge, 1)
    }

    pub fn at(forge: &Forge, last: u8) -> Browser {
        Browser {
            addr: forge.server().addr,
            from: IpAddr::from([127, 0, 0, last]),
            cookies: Vec::new(),
        }
    }

    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn request(&mut self, head: &str, body: &str) -> HttpResponse {
        let cookies: Vec<String> = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut head = head.to_string();
        if !cookies.is_empty() {
            head.push_str(&format!("\r\nCookie: {}", cookies.join("; ")));
        }
        let response = send_from(self.from, self.addr, &head, body.as_bytes());
        for (name, value) in &response.headers {
            if !name.eq_ignore_ascii_case("set-cookie") {
                continue;
            }
            let pair = value.split(';').next().unwrap_or_default();
            let (key, val) = pair.split_once('=').unwrap();
            self.cookies.retain(|(k, _)| k != key);
            if !value.contains("Max-Age=0") {
                self.cookies.push((key.to_string(), val.to_string()));
            }
        }
        response
    }

    pub fn get(&mut self, path: &str) -> HttpResponse {
        self.request(&format!("GET {path} HTTP/1.1"), "")
    }

    /// POSTs `fields` (already URL-encoded values) with `extra` headers.
    pub fn post(&mut self, path: &str, fields: &[(&str, &str)], extra: &str) -> HttpResponse {
        let body: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let body = body.join("&");
        let mut head = format!(
            "POST {path} HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}",
            body.len()
        );
        if !extra.is_empty() {
            head.push_str("\r\n");
            head.push_str(extra);
        }
        self.request(&head, &body)
    }

    /// Loads the sign-in form and returns its CSRF token.
    pub fn sign_in_form(&mut self) -> String {
        let page = self.get("/-/login");
        assert_eq!(page.status, 200, "{}", page.text());
        assert!(self.cookie("vole_pre").is_some(), "no pre-session cookie");
        hidden_field(&page.text(), "csrf")
    }

    /// Signs in as `user` and returns the response (a 303 when it worked).
    pub fn sign_in(&mut self, user: &str, password: &str, next: &str) -> HttpResponse {
        let csrf = self.sign_in_form();
        let password = password.replace(' ', "+");
        self.post(
            "/-/login",
            &[
                ("user", user),
                ("password", &password),
                ("csrf", &csrf),
                ("next", next),
            ],
            "",
        )
    }

    /// The sign-out form's token on a page.
    pub fn sign_out_token(&mut self) -> String {
        hidden_field(&self.get("/").text(), "csrf")
    }
}

/// One request from `source`, read to EOF.
pub fn send_from(source: IpAddr, addr: SocketAddr, head: &str, body: &[u8]) -> HttpResponse {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(source, 0).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut stream: std::net::TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!("{head}\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    parse_response(&raw)
}
