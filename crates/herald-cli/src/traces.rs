//! Traces over OTLP (`HERALD_TRACES=otlp`): tracing's spans — each HTTP request, submit
//! and attempt (`herald::traces`) — become OpenTelemetry spans, batched and exported as
//! OTLP/HTTP protobuf to a collector. Off by default; when off nothing here runs and
//! herald's spans stay disabled, as they always were.
//!
//! The export goes through herald's own reqwest client on the process's tokio runtime:
//! the SDK's batch processor exports from a thread of its own, so the request is spawned
//! onto the runtime and its handle awaited there.

use anyhow::{Context, Result};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::time::Duration;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};

/// Where spans go: a collector's base URL, or the standard `OTEL_EXPORTER_OTLP_*`
/// variables when none is given.
#[derive(Debug, Clone)]
pub struct Otlp {
    /// `…/v1/traces`, or `None` for the standard variables' choice.
    traces_url: Option<String>,
}

/// One export waits at most this long for the collector (the SDK's default too).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

impl Otlp {
    pub fn new(endpoint: Option<&str>) -> Result<Otlp> {
        let traces_url = match endpoint.map(str::trim).filter(|e| !e.is_empty()) {
            None => None,
            Some(base) => {
                let url = url::Url::parse(base)
                    .ok()
                    .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
                    .with_context(|| {
                        format!(
                            "HERALD_OTLP_ENDPOINT: {:?} is not an http(s) URL",
                            herald_core::redact_url(base)
                        )
                    })?;
                Some(format!("{}/v1/traces", url.as_str().trim_end_matches('/')))
            }
        };
        Ok(Otlp { traces_url })
    }

    /// The layer that turns herald's spans into OpenTelemetry spans, and the provider to
    /// shut down (flushing what is batched) before the runtime ends. Marks traces on for
    /// the library (`herald::traces::enable`).
    pub fn install<S>(
        &self,
        runtime: tokio::runtime::Handle,
    ) -> Result<(impl Layer<S> + use<S>, SdkTracerProvider)>
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    {
        // reqwest here takes rustls without a provider: ring, as the channels use.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = OnRuntime {
            client: reqwest::Client::builder()
                .timeout(EXPORT_TIMEOUT)
                .build()
                .context("cannot build the OTLP exporter's HTTP client")?,
            runtime,
        };
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary);
        if let Some(url) = &self.traces_url {
            exporter = exporter.with_endpoint(url.clone());
        }
        let exporter = exporter.build().context("cannot build the OTLP span exporter")?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("herald");
        }
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.build())
            .build();
        let tracer = provider.tracer("herald");
        // herald's own spans only: a request's, a submit's, an attempt's (info level).
        let spans = Targets::new()
            .with_target("herald", LevelFilter::INFO)
            .with_target("herald_server", LevelFilter::INFO);
        let layer = tracing_opentelemetry::layer().with_tracer(tracer).with_filter(spans);
        herald::traces::enable();
        Ok((layer, provider))
    }
}

/// reqwest on the process's runtime, for the SDK's export thread.
#[derive(Debug)]
struct OnRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let exchange = async move {
            let response = client.execute(reqwest::Request::try_from(request)?).await?;
            let status = response.status();
            let body = response.bytes().await?;
            Ok::<_, HttpError>(Response::builder().status(status).body(body)?)
        };
        self.runtime.spawn(exchange).await?
    }
}
