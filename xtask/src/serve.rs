//! `cargo xtask serve`: a small static file server for `build/site`.
//!
//! GET and HEAD only; `Content-Type` by extension, `Content-Length` always (the page's download
//! progress needs it), `Cache-Control: no-cache`, and cross-origin isolation headers (COOP/COEP:
//! every resource is same-origin, and isolation gives the page precise timers). Paths with `..`
//! are refused; anything that is not a file (or a directory with an `index.html`) is a 404.

use anyhow::{bail, Context, Result};
use std::fs::File;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use tiny_http::{Header, Method, Request, Response, Server};

/// Requests are handled by this many threads, so large model downloads (several pages of the
/// end-to-end tests may still be streaming one) do not block the rest.
const THREADS: usize = 16;

/// A running server; dropping it stops the server and joins its threads.
pub struct Running {
    pub addr: SocketAddr,
    server: Arc<Server>,
    threads: Vec<JoinHandle<()>>,
}

impl Running {
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Blocks until the server threads end (they don't, unless the server is unblocked).
    pub fn wait(mut self) {
        for t in self.threads.drain(..) {
            t.join().ok();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        for _ in &self.threads {
            self.server.unblock();
        }
        for t in self.threads.drain(..) {
            t.join().ok();
        }
    }
}

/// Starts serving `root` on `host:port` (port 0 picks a free one) in background threads.
pub fn start(root: &Path, host: &str, port: u16) -> Result<Running> {
    if !root.join("index.html").is_file() {
        bail!(
            "{} has no index.html: run `cargo xtask build` first",
            root.display()
        );
    }
    let root = root
        .canonicalize()
        .with_context(|| format!("resolving {}", root.display()))?;
    let server = Server::http((host, port)).map_err(|err| {
        let in_use = err
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == ErrorKind::AddrInUse);
        if in_use {
            anyhow::anyhow!(
                "port {port} on {host} is already in use (another edgefit demo?): \
                 pick another with `--port {}`",
                port.wrapping_add(1).max(1024)
            )
        } else {
            anyhow::anyhow!("cannot listen on {host}:{port}: {err}")
        }
    })?;
    let addr = server
        .server_addr()
        .to_ip()
        .context("the server is not listening on an IP address")?;
    let server = Arc::new(server);
    let threads = (0..THREADS)
        .map(|_| {
            let (server, root) = (Arc::clone(&server), root.clone());
            std::thread::spawn(move || {
                while let Ok(request) = server.recv() {
                    handle(&root, request);
                }
            })
        })
        .collect();
    Ok(Running {
        addr,
        server,
        threads,
    })
}

/// `serve` and `demo`: serve until interrupted.
pub fn serve_forever(root: &Path, host: &str, port: u16) -> Result<()> {
    let running = start(root, host, port)?;
    println!("\nedgefit is running at {}", running.url());
    println!("(serving {}; press Ctrl+C to stop)", root.display());
    running.wait();
    Ok(())
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("static header is valid")
}

fn common_headers() -> [Header; 4] {
    [
        header("Cache-Control", "no-cache"),
        header("Cross-Origin-Opener-Policy", "same-origin"),
        header("Cross-Origin-Embedder-Policy", "require-corp"),
        header("X-Content-Type-Options", "nosniff"),
    ]
}

fn handle(root: &Path, request: Request) {
    let result = match request.method() {
        Method::Get | Method::Head => match resolve(root, request.url()) {
            Ok(path) => match File::open(&path) {
                Ok(file) => {
                    // A known length is always sent as Content-Length (tiny_http would switch to
                    // chunked encoding above 32 KiB, and the page's progress bar needs the total).
                    let mut response = Response::from_file(file)
                        .with_chunked_threshold(usize::MAX)
                        .with_header(header("Content-Type", content_type(&path)));
                    for h in common_headers() {
                        response.add_header(h);
                    }
                    request.respond(response)
                }
                Err(_) => respond_status(request, 404, "not found"),
            },
            Err(status) => {
                let msg = if status == 400 {
                    "bad path"
                } else {
                    "not found"
                };
                respond_status(request, status, msg)
            }
        },
        _ => respond_status(request, 405, "method not allowed"),
    };
    // A client that went away mid-download is not the server's problem.
    drop(result);
}

fn respond_status(request: Request, status: u16, msg: &str) -> std::io::Result<()> {
    let mut response = Response::from_string(format!("{status} {msg}\n"))
        .with_status_code(status)
        .with_header(header("Content-Type", "text/plain; charset=utf-8"));
    for h in common_headers() {
        response.add_header(h);
    }
    request.respond(response)
}

/// Maps a request URL to a file under `root`: 400 for traversal attempts or undecodable paths,
/// 404 when nothing is there. Directories serve their `index.html`.
fn resolve(root: &Path, url: &str) -> Result<PathBuf, u16> {
    let path = url.split(['?', '#']).next().unwrap_or("");
    let decoded = percent_decode(path).ok_or(400u16)?;
    if !decoded.starts_with('/') {
        return Err(400);
    }
    let mut full = root.to_path_buf();
    for part in decoded.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(400),
            p if p.contains('\\') || p.contains('\0') => return Err(400),
            p => full.push(p),
        }
    }
    if full.is_dir() {
        full.push("index.html");
    }
    if !full.is_file() {
        return Err(404);
    }
    // Refuse anything that escapes the root through a symlink.
    match full.canonicalize() {
        Ok(real) if real.starts_with(root) => Ok(full),
        _ => Err(404),
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

pub fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "wasm" => "application/wasm",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "ico" => "image/x-icon",
        "txt" | "md" => "text/plain; charset=utf-8",
        "ts" => "text/plain; charset=utf-8",
        _ => "application/octet-stream", // .gguf, .bin, .safetensors, …
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    /// One raw HTTP/1.1 request; returns (status line, headers lowercased, body).
    fn get(addr: SocketAddr, method: &str, path: &str) -> (String, String, Vec<u8>) {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let (status, headers) = head.split_once("\r\n").unwrap();
        (
            status.to_string(),
            headers.to_ascii_lowercase(),
            raw[split + 4..].to_vec(),
        )
    }

    #[test]
    fn serves_files_with_types_and_lengths_and_refuses_traversal() {
        let dir =
            crate::util::target_dir().join(format!("xtask-test-serve-{}", std::process::id()));
        let site = dir.join("site");
        fs::create_dir_all(site.join("pkg")).unwrap();
        fs::create_dir_all(site.join("models")).unwrap();
        fs::write(site.join("index.html"), "<!doctype html>hi").unwrap();
        fs::write(site.join("pkg/a b.js"), "export {}").unwrap();
        fs::write(site.join("pkg/x.wasm"), b"\0asm\x01\0\0\0").unwrap();
        fs::write(site.join("models/m.gguf"), vec![7u8; 100_000]).unwrap();
        fs::write(dir.join("secret.txt"), "no").unwrap();

        let server = start(&site, "127.0.0.1", 0).unwrap();
        let addr = server.addr;

        let (status, headers, body) = get(addr, "GET", "/");
        assert!(status.contains("200"), "{status}");
        assert!(headers.contains("content-type: text/html"), "{headers}");
        assert!(headers.contains("cache-control: no-cache"), "{headers}");
        assert_eq!(body, b"<!doctype html>hi");

        let (status, headers, _) = get(addr, "GET", "/pkg/a%20b.js?v=1");
        assert!(status.contains("200"), "{status}");
        assert!(
            headers.contains("content-type: text/javascript"),
            "{headers}"
        );

        let (_, headers, _) = get(addr, "GET", "/pkg/x.wasm");
        assert!(
            headers.contains("content-type: application/wasm"),
            "{headers}"
        );

        let (status, headers, body) = get(addr, "GET", "/models/m.gguf");
        assert!(status.contains("200"), "{status}");
        assert!(
            headers.contains("content-type: application/octet-stream"),
            "{headers}"
        );
        assert!(headers.contains("content-length: 100000"), "{headers}");
        assert!(!headers.contains("chunked"), "{headers}");
        assert_eq!(body.len(), 100_000);

        let (status, headers, body) = get(addr, "HEAD", "/models/m.gguf");
        assert!(status.contains("200"), "{status}");
        assert!(headers.contains("content-length: 100000"), "{headers}");
        assert!(body.is_empty());

        for bad in [
            "/../secret.txt",
            "/pkg/%2e%2e/%2e%2e/secret.txt",
            "/pkg/..%2fsecret.txt",
        ] {
            let (status, _, body) = get(addr, "GET", bad);
            assert!(status.contains("400"), "{bad}: {status}");
            assert!(!String::from_utf8_lossy(&body).contains("no"), "{bad}");
        }
        let (status, _, _) = get(addr, "GET", "/nope.js");
        assert!(status.contains("404"), "{status}");
        let (status, _, _) = get(addr, "POST", "/");
        assert!(status.contains("405"), "{status}");

        // The same port twice: a clear message.
        let err = start(&site, "127.0.0.1", addr.port()).err().unwrap();
        assert!(format!("{err:#}").contains("already in use"), "{err:#}");

        drop(server);
        fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn content_types() {
        assert_eq!(
            content_type(Path::new("a.mjs")),
            "text/javascript; charset=utf-8"
        );
        assert_eq!(content_type(Path::new("a.json")), "application/json");
        assert_eq!(content_type(Path::new("a.css")), "text/css; charset=utf-8");
        assert_eq!(
            content_type(Path::new("m.GGUF")),
            "application/octet-stream"
        );
    }
}
