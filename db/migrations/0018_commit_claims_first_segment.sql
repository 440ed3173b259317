-- Hand-written: commit a reply and claim its first segment in one statement.
-- The activity that commits a reply (startExecution) then makes the quick attempt at its first
-- segment; claiming that segment was a statement of its own. execution_commit_claim runs
-- execution_commit and then, for a reply that is to be sent now (reply_pending, with segments, and
-- nobody to wake first), segment_claim of its first segment with the caller's claim parameters,
-- in the same transaction. The claim is the quick attempt's: with p_max_wait_ms a paced chat is
-- declined (no claim, no reserved slot) exactly as before. A failed claim rolls the commit back
-- with it; the commit is idempotent and its activity retries.
-- Returns the commit's jsonb (as execution_commit) and segment_claim's row, all NULL when no claim
-- was attempted.
-- Time: segment_claim dates the lease and the chat's pacing slot with now(), the start of this
-- statement's transaction, so both start the commit's duration (milliseconds; longer only if
-- another attempt held the message's row lock) early: the lease is that much shorter than 60 s,
-- and the gap to the chat's next send can be that much shorter than the interval (1.1 s per
-- private Telegram chat, against its limit of about 1 s).
-- Tenancy: SECURITY INVOKER; execution_commit switches the transaction to tenant_app_writer and
-- the tenant (runtime_scope), so segment_claim is then called under that role (granted below).
-- IDEMPOTENT: CREATE OR REPLACE; grants are repeatable.
CREATE OR REPLACE FUNCTION public.execution_commit_claim(
    p_tenant_id text, p_event_id text, p_owner text, p_lease_seconds int,
    p_reply_id text, p_text text, p_content_digest text, p_outcome text, p_segments jsonb,
    p_wake_waiters boolean,
    p_claim_owner text, p_claim_lease_seconds int, p_intervals_ms jsonb, p_max_wait_ms int
) RETURNS TABLE (
    committed_reply jsonb,
    claimed boolean, taken_over boolean, segment_id text, event_id text, reply_id text, segment_index int,
    segment_count int, content text, channel text, target jsonb, status text, attempts int,
    fencing_token bigint, idempotency_key text, binding_id text, created_at timestamptz, last_error text,
    lease_expires_at timestamptz, wait_ms float8, config jsonb, secret_ref text, key_id text, ciphertext bytea
)
LANGUAGE plpgsql
SET search_path = pg_catalog, public
AS $$
DECLARE
    v_commit jsonb;
BEGIN
    v_commit := public.execution_commit(p_tenant_id, p_event_id, p_owner, p_lease_seconds, p_reply_id,
                                        p_text, p_content_digest, p_outcome, p_segments, p_wake_waiters);
    IF v_commit ->> 'status' = 'reply_pending'
       AND jsonb_array_length(coalesce(v_commit -> 'wake', '[]'::jsonb)) = 0
       AND jsonb_array_length(coalesce(v_commit -> 'segment_ids', '[]'::jsonb)) > 0 THEN
        RETURN QUERY
        SELECT v_commit, c.*
        FROM public.segment_claim(p_tenant_id, v_commit -> 'segment_ids' ->> 0, p_claim_owner,
                                  p_claim_lease_seconds, p_intervals_ms, p_max_wait_ms) AS c;
        IF FOUND THEN
            RETURN;
        END IF;
    END IF;
    RETURN QUERY
    SELECT v_commit, NULL::boolean, NULL::boolean, NULL::text, NULL::text, NULL::text, NULL::int,
           NULL::int, NULL::text, NULL::text, NULL::jsonb, NULL::text, NULL::int,
           NULL::bigint, NULL::text, NULL::text, NULL::timestamptz, NULL::text,
           NULL::timestamptz, NULL::float8, NULL::jsonb, NULL::text, NULL::text, NULL::bytea;
END
$$;
--> statement-breakpoint
REVOKE ALL ON FUNCTION public.execution_commit_claim(text, text, text, int, text, text, text, text, jsonb, boolean, text, int, jsonb, int) FROM PUBLIC;
--> statement-breakpoint
GRANT EXECUTE ON FUNCTION public.segment_claim(text, text, text, int, jsonb, int) TO tenant_app_writer;
