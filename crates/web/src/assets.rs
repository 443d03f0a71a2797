//! Static assets compiled into the binary (`static/`), served with
//! long-lived cache headers.

use super::*;

pub(super) fn style_css() -> &'static str {
    static CSS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    CSS.get_or_init(|| {
        format!(
            "{}\n{}",
            include_str!("../static/style.css"),
            highlight::stylesheet()
        )
    })
}

/// `GET /static/{file}`: the stylesheet and the copy-button script, built
/// into the binary.
pub async fn static_file(Path(file): Path<String>) -> Response {
    let (body, content_type): (&'static str, &'static str) = match file.as_str() {
        // One stylesheet: the site's own, then the highlight classes.
        "style.css" => (style_css(), "text/css; charset=utf-8"),
        "copy.js" => (
            include_str!("../static/copy.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return AppError::not_found("There is no such file.").into_response(),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}
