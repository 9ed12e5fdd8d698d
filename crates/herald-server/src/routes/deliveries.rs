//! `/v1/deliveries` and `/v1/quotas`: a tenant's own view. Another tenant's delivery is a
//! 404, never a 403 — the wall does not say what is behind it.

use crate::audit::{self, By};
use crate::cursor;
use crate::error::{ApiError, ApiResult};
use crate::extract::{ClientAddr, JsonBody, NoQuery, PathParams, QueryParams, TenantAuth};
use crate::routes::path_id;
use crate::state::AppState;
use crate::wire::{
    AttemptList, BatchResult, BatchResults, BulkRequest, BulkResult, CreateDelivery,
    CreateDeliveryBatch, DeliveryList, DeliveryView, ErrorView, QuotaList,
};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use herald::{BulkAction, BulkFilter, DeliveryFilter, DeliveryState, SubmitRequest};
use serde::Deserialize;

/// Default page of `GET /v1/deliveries`; the largest is `herald_core::limits::PAGE_MAX`.
pub const PAGE_DEFAULT: usize = 50;
pub use herald_core::limits::PAGE_MAX;
use herald_core::limits::{CHANNEL_LEN_MAX, SUBMIT_BATCH_MAX};

#[utoipa::path(post, path = "/v1/deliveries", request_body = CreateDelivery,
    responses((status = 201, body = DeliveryView), (status = 200, body = DeliveryView),
        (status = 400), (status = 401), (status = 402), (status = 413), (status = 422),
        (status = 503, description = "outcome_unknown: send the same request again to learn it; busy: nothing was changed")))]
pub async fn create(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
    headers: HeaderMap,
    JsonBody(body): JsonBody<CreateDelivery>,
) -> ApiResult<(StatusCode, Json<DeliveryView>)> {
    let header_key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::invalid("Idempotency-Key must be visible ASCII"))?
                .to_string(),
        ),
    };
    let request = submit_request(&state, tenant, body, header_key)?;
    let answer = state.herald.submit_alone(&request).await;
    let (status, view) = submit_answer(answer)?;
    Ok((status, Json(view)))
}

#[utoipa::path(post, path = "/v1/deliveries/batch", request_body = CreateDeliveryBatch,
    responses((status = 200, body = BatchResults, description = "Each item's own status and delivery or error, in the order sent"),
        (status = 400), (status = 401), (status = 413),
        (status = 503, description = "busy: nothing was changed")))]
pub async fn create_batch(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
    JsonBody(body): JsonBody<CreateDeliveryBatch>,
) -> ApiResult<Json<BatchResults>> {
    if body.deliveries.is_empty() {
        return Err(ApiError::invalid("deliveries must hold at least one submit"));
    }
    if body.deliveries.len() > SUBMIT_BATCH_MAX {
        return Err(ApiError::invalid(format!(
            "a batch holds at most {SUBMIT_BATCH_MAX} submits, got {}",
            body.deliveries.len()
        )));
    }
    // Items refused before the engine keep their place; the others are submitted together.
    let mut results: Vec<Option<BatchResult>> = Vec::with_capacity(body.deliveries.len());
    let mut requests = Vec::with_capacity(body.deliveries.len());
    for item in body.deliveries {
        match submit_request(&state, tenant, item, None) {
            Ok(request) => {
                requests.push(request);
                results.push(None);
            }
            Err(refused) => {
                crate::metrics::submit("invalid");
                results.push(Some(BatchResult::refused(refused)));
            }
        }
    }
    let mut answers = state.herald.submit_many(&requests).await?.into_iter();
    let results = results
        .into_iter()
        .map(|result| match result {
            Some(refused) => refused,
            None => match answers.next().map(submit_answer) {
                Some(Ok((status, view))) => {
                    BatchResult { status: status.as_u16(), delivery: Some(view), error: None }
                }
                Some(Err(refused)) => BatchResult::refused(refused),
                None => BatchResult::refused(ApiError::internal()),
            },
        })
        .collect();
    Ok(Json(BatchResults { results }))
}

impl BatchResult {
    fn refused(e: ApiError) -> BatchResult {
        BatchResult {
            status: e.status.as_u16(),
            delivery: None,
            error: Some(ErrorView {
                code: e.code.to_string(),
                message: e.message,
                field: e.field.map(str::to_string),
                reason: e.reason.map(str::to_string),
            }),
        }
    }
}

/// The engine's request for one submit as `POST /v1/deliveries` takes it: the checks that
/// depend on this server (its channels, their recipients and payloads) and the wire's
/// spellings (the header key, RFC 3339 times).
fn submit_request(
    state: &AppState,
    tenant: herald::TenantId,
    body: CreateDelivery,
    header_key: Option<String>,
) -> ApiResult<SubmitRequest> {
    let operation_key = match (header_key, body.operation_key) {
        (Some(h), Some(b)) if h != b => {
            return Err(ApiError::invalid("Idempotency-Key and operation_key differ"));
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => {
            return Err(ApiError::invalid_field(
                "operation_key",
                "empty",
                "operation_key (or an Idempotency-Key header) is required",
            ));
        }
    };
    if !state.channels.contains(&body.channel) {
        let known: Vec<&str> = state.channels.iter().map(String::as_str).collect();
        return Err(ApiError::invalid_field(
            "channel",
            "not_configured",
            format!(
                "unknown or unconfigured channel {:?} (this server delivers: {})",
                body.channel,
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            ),
        ));
    }
    let payload = herald::Payload::from_text(body.payload.get());
    herald::channels::validate(&body.channel, &body.to, &payload)
        .map_err(|refused| ApiError::invalid_field(refused.field, refused.code, refused.message))?;
    let send_at = match body.send_at {
        None => None,
        Some(s) => Some(s.parse::<jiff::Timestamp>().map_err(|_| send_at_refused(&s))?),
    };
    Ok(SubmitRequest {
        tenant,
        operation_key,
        channel: body.channel,
        to: body.to,
        payload,
        quota_key: body.quota_key,
        cost: body.cost,
        send_at,
        max_attempts: body.max_attempts,
    })
}

/// A submit's answer as HTTP says it: 201 created, 200 duplicate, or the error's status;
/// counted in the metrics either way.
fn submit_answer(
    answer: Result<herald::Submitted, herald::Error>,
) -> ApiResult<(StatusCode, DeliveryView)> {
    let submitted = match answer {
        Ok(submitted) => submitted,
        Err(e) => {
            crate::metrics::submit(submit_result(&e));
            return Err(e.into());
        }
    };
    crate::metrics::submit(if submitted.duplicate { "duplicate" } else { "created" });
    let status = if submitted.duplicate { StatusCode::OK } else { StatusCode::CREATED };
    let mut view = DeliveryView::from(submitted.delivery);
    view.duplicate = Some(submitted.duplicate);
    Ok((status, view))
}

fn submit_result(e: &herald::Error) -> &'static str {
    match e {
        herald::Error::IdempotencyKeyReused => "reused",
        herald::Error::QuotaExhausted { .. } => "quota_exhausted",
        herald::Error::Invalid(_) => "invalid",
        herald::Error::Busy { .. } => "busy",
        _ => "error",
    }
}

#[utoipa::path(get, path = "/v1/deliveries/{id}", params(("id" = String, Path)),
    responses((status = 200, body = DeliveryView), (status = 401), (status = 404)))]
pub async fn show(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
    PathParams(id): PathParams<String>,
) -> ApiResult<Json<DeliveryView>> {
    let id = path_id(&id, "delivery")?;
    Ok(Json(state.herald.delivery(tenant, id).await?.into()))
}

#[utoipa::path(get, path = "/v1/deliveries/{id}/attempts", params(("id" = String, Path)),
    responses((status = 200, body = AttemptList), (status = 401), (status = 404)))]
pub async fn attempts(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
    PathParams(id): PathParams<String>,
) -> ApiResult<Json<AttemptList>> {
    let id = path_id(&id, "delivery")?;
    let attempts = state.herald.attempts(tenant, id).await?;
    Ok(Json(AttemptList { attempts: attempts.into_iter().map(Into::into).collect() }))
}

#[utoipa::path(post, path = "/v1/deliveries/{id}/replay", params(("id" = String, Path)),
    responses((status = 200, body = DeliveryView), (status = 401), (status = 402), (status = 404), (status = 409)))]
pub async fn replay(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    PathParams(id): PathParams<String>,
) -> ApiResult<Json<DeliveryView>> {
    let id = path_id(&id, "delivery")?;
    let replayed = state.herald.replay(tenant, id).await?;
    let by = By::tenant(&headers, client);
    audit::record(&state, by.entry(Some(tenant), "replay").target(id.to_string())).await;
    Ok(Json(replayed.into()))
}

#[utoipa::path(post, path = "/v1/deliveries/{id}/cancel", params(("id" = String, Path)),
    responses((status = 200, body = DeliveryView), (status = 401), (status = 404), (status = 409)))]
pub async fn cancel(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    PathParams(id): PathParams<String>,
) -> ApiResult<Json<DeliveryView>> {
    let id = path_id(&id, "delivery")?;
    let cancelled = state.herald.cancel(tenant, id).await?;
    let by = By::tenant(&headers, client);
    audit::record(&state, by.entry(Some(tenant), "cancel").target(id.to_string())).await;
    Ok(Json(cancelled.into()))
}

/// `GET /v1/deliveries` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    pub state: Option<String>,
    pub channel: Option<String>,
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

#[utoipa::path(get, path = "/v1/deliveries", params(ListQuery),
    responses((status = 200, body = DeliveryList), (status = 400), (status = 401)))]
pub async fn list(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    QueryParams(q): QueryParams<ListQuery>,
) -> ApiResult<Json<DeliveryList>> {
    let filters = PageQuery {
        state: q.state.as_deref(),
        channel: q.channel.as_deref(),
        error_code: None,
        key_prefix: None,
        to_prefix: None,
        failed_since: None,
        from: None,
        to: None,
        limit: q.limit.as_deref(),
        cursor: q.cursor.as_deref(),
    };
    page(&state, Some(tenant), &filters).await.map(Json)
}

/// A page's filters and position, as a query gave them (unchecked).
#[derive(Debug, Default)]
pub(crate) struct PageQuery<'q> {
    pub state: Option<&'q str>,
    pub channel: Option<&'q str>,
    /// The dashboard's: the latest attempt's error code, and prefixes of the operation key
    /// and the recipient.
    pub error_code: Option<&'q str>,
    pub key_prefix: Option<&'q str>,
    pub to_prefix: Option<&'q str>,
    /// Failed at or after (RFC 3339).
    pub failed_since: Option<&'q str>,
    /// Created at or after (RFC 3339).
    pub from: Option<&'q str>,
    /// Created before (RFC 3339).
    pub to: Option<&'q str>,
    pub limit: Option<&'q str>,
    pub cursor: Option<&'q str>,
}

/// One keyset page of a tenant's deliveries, newest first, as `GET /v1/deliveries` and the
/// dashboard list them; the cursor of the next page when there is one.
pub(crate) async fn page(
    state: &AppState,
    tenant: Option<herald::TenantId>,
    q: &PageQuery<'_>,
) -> ApiResult<DeliveryList> {
    let filters = [q.state, q.channel, q.error_code, q.key_prefix, q.to_prefix, q.failed_since];
    let limit = match q.limit {
        None => PAGE_DEFAULT,
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=PAGE_MAX).contains(&n) => n,
            _ => return Err(ApiError::invalid(format!("limit must be between 1 and {PAGE_MAX}"))),
        },
    };
    let filter_state = parse_state(q.state)?;
    let before = match q.cursor {
        None => None,
        Some(c) => Some(cursor::decode(c, &filters).map_err(|e| match e {
            cursor::CursorError::Malformed => ApiError::invalid("malformed cursor"),
            cursor::CursorError::OtherFilters => {
                ApiError::invalid("this cursor belongs to a listing with other filters")
            }
        })?),
    };
    check_channel(q.channel)?;
    let filter = DeliveryFilter {
        tenant,
        state: filter_state,
        channel: q.channel.map(str::to_string),
        error_code: q.error_code.map(str::to_string),
        key_prefix: q.key_prefix.map(str::to_string),
        to_prefix: q.to_prefix.map(str::to_string),
        failed_since: parse_time(q.failed_since, "failed_since")?,
        before: before.map(herald::DeliveryId::from_uuid),
        from: parse_time(q.from, "from")?,
        to: parse_time(q.to, "to")?,
        limit: limit + 1,
    };
    let mut rows = state.herald.deliveries(&filter).await?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next_cursor = match (more, rows.last()) {
        (true, Some(last)) => Some(cursor::encode(last.id.as_uuid(), &filters)),
        _ => None,
    };
    Ok(DeliveryList { deliveries: rows.into_iter().map(Into::into).collect(), next_cursor })
}

#[utoipa::path(get, path = "/v1/quotas", responses((status = 200, body = QuotaList), (status = 401)))]
pub async fn quotas(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
) -> ApiResult<Json<QuotaList>> {
    let quotas = state.herald.quotas(tenant).await?;
    Ok(Json(QuotaList { quotas: quotas.into_iter().map(Into::into).collect() }))
}

/// A `state` filter; anything but a state's name is a 400.
pub(crate) fn parse_state(raw: Option<&str>) -> ApiResult<Option<DeliveryState>> {
    raw.map(|s| {
        s.parse::<DeliveryState>().map_err(|_| {
            ApiError::invalid("state must be pending, sending, sent, failed or cancelled")
        })
    })
    .transpose()
}

/// A `channel` filter: 1 to `CHANNEL_LEN_MAX` printable characters.
pub(crate) fn check_channel(raw: Option<&str>) -> ApiResult<()> {
    if raw.is_some_and(|c| {
        c.is_empty()
            || c.len() > CHANNEL_LEN_MAX
            || c.chars().any(herald_core::ident::is_refused_in_names)
    }) {
        return Err(ApiError::invalid(format!(
            "channel must be 1 to {CHANNEL_LEN_MAX} printable characters"
        )));
    }
    Ok(())
}

/// A time filter (`from`, `to`): RFC 3339.
pub(crate) fn parse_time(raw: Option<&str>, name: &str) -> ApiResult<Option<jiff::Timestamp>> {
    raw.map(|s| {
        s.parse::<jiff::Timestamp>().map_err(|_| {
            ApiError::invalid(format!("{name} must be an RFC 3339 time, like 2026-01-02T03:04:05Z"))
        })
    })
    .transpose()
}

/// Longest `error_code` filter (codes are short names like `http_503`).
const ERROR_CODE_LEN_MAX: usize = 100;

impl BulkRequest {
    /// The engine's filter, each part checked.
    pub(crate) fn filter(&self) -> ApiResult<BulkFilter> {
        check_channel(self.channel.as_deref())?;
        if self.error_code.as_deref().is_some_and(|c| {
            c.is_empty()
                || c.len() > ERROR_CODE_LEN_MAX
                || c.chars().any(herald_core::ident::is_refused_in_names)
        }) {
            return Err(ApiError::invalid(format!(
                "error_code must be 1 to {ERROR_CODE_LEN_MAX} printable characters"
            )));
        }
        Ok(BulkFilter {
            state: parse_state(self.state.as_deref())?,
            channel: self.channel.clone(),
            from: parse_time(self.from.as_deref(), "from")?,
            to: parse_time(self.to.as_deref(), "to")?,
            error_code: self.error_code.clone(),
            destination: self
                .destination
                .as_deref()
                .map(herald_core::hold::check_destination)
                .transpose()
                .map_err(ApiError::invalid)?,
            through: self.through.as_deref().map(|t| path_id(t, "through")).transpose().map_err(
                |_| ApiError::invalid("through must be a delivery id (a dry run's `through`)"),
            )?,
            max: match self.max {
                Some(m) if m > herald::BULK_MAX as u64 => {
                    return Err(ApiError::invalid(format!(
                        "max must be at most {}",
                        herald::BULK_MAX
                    )));
                }
                other => other,
            },
        })
    }
}

#[utoipa::path(post, path = "/v1/deliveries/replay", request_body = BulkRequest,
    responses((status = 200, body = BulkResult, description = "What matched and what was replayed (each keeps its id and takes a new reservation)"),
        (status = 400), (status = 401)))]
pub async fn replay_matching(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    JsonBody(body): JsonBody<BulkRequest>,
) -> ApiResult<Json<BulkResult>> {
    let by = By::tenant(&headers, client);
    bulk(&state, Some(tenant), BulkAction::Replay, &body, &by, &Default::default()).await.map(Json)
}

#[utoipa::path(post, path = "/v1/deliveries/cancel", request_body = BulkRequest,
    responses((status = 200, body = BulkResult, description = "What matched and what was cancelled (each releases its reservation)"),
        (status = 400), (status = 401)))]
pub async fn cancel_matching(
    State(state): State<AppState>,
    TenantAuth(tenant): TenantAuth,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    JsonBody(body): JsonBody<BulkRequest>,
) -> ApiResult<Json<BulkResult>> {
    let by = By::tenant(&headers, client);
    bulk(&state, Some(tenant), BulkAction::Cancel, &body, &by, &Default::default()).await.map(Json)
}

/// A bulk replay or cancel for one tenant, as the API and the dashboard run it; what it
/// changed goes into the audit log (a dry run changes nothing and is not logged).
/// `tenant`: `None` is every tenant's (the admin's incident console); `progress` counts
/// as it goes.
pub(crate) async fn bulk(
    state: &AppState,
    tenant: Option<herald::TenantId>,
    action: BulkAction,
    body: &BulkRequest,
    by: &By,
    progress: &herald::BulkProgress,
) -> ApiResult<BulkResult> {
    let filter = body.filter()?;
    let (herald, dry) = (&state.herald, body.dry_run);
    let report = match tenant {
        Some(tenant) => herald.bulk_tracked(tenant, action, &filter, dry, progress).await?,
        None => herald.bulk_all_tenants_tracked(action, &filter, dry, progress).await?,
    };
    let result = BulkResult::new(body.dry_run, report);
    if !body.dry_run {
        let name = match action {
            BulkAction::Replay => "bulk_replay",
            BulkAction::Cancel => "bulk_cancel",
        };
        let entry = by.entry(tenant, name).count(result.changed as i64);
        let entry = match &filter.destination {
            Some(destination) => entry.target(format!("destination:{destination}")),
            None => entry,
        };
        audit::record(state, entry).await;
    }
    Ok(result)
}

/// Why a `send_at` that does not parse as an instant is refused: a date and time that does
/// (`9999-12-31T23:59:59Z`, past what an instant here can hold) is out of range, as on the
/// SQL API; anything else is not a time.
fn send_at_refused(text: &str) -> ApiError {
    let date_time = text.get(..19).map(|head| head.replacen(' ', "T", 1));
    if date_time.is_some_and(|dt| dt.parse::<jiff::civil::DateTime>().is_ok()) {
        return ApiError::invalid_field(
            "send_at",
            "out_of_range",
            "send_at must be between 1970-01-01 and 9999-12-30",
        );
    }
    ApiError::invalid_field(
        "send_at",
        "not_a_time",
        "send_at must be an RFC 3339 time, like 2026-01-02T03:04:05Z",
    )
}
