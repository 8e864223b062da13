"""The SQL of the PostgreSQL session store: its schema and the append function."""

__all__ = ["APPEND", "INFO_COLUMNS", "SCHEMA", "SCHEMA_LOCK"]

# Taken while the schema is created or checked, so that workers starting together do not
# race on CREATE TABLE. Any fixed number works; this one is "hookloop" on a phone keypad.
SCHEMA_LOCK = 46655667

SCHEMA = [
    """CREATE TABLE hookloop_sessions (
        session_id text PRIMARY KEY,
        parent_id text,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL,
        message_count bigint NOT NULL,
        last_seq bigint NOT NULL
    )""",
    "CREATE INDEX hookloop_sessions_updated ON hookloop_sessions (updated_at)",
    """CREATE TABLE hookloop_messages (
        session_id text NOT NULL,
        seq bigint NOT NULL,
        message_id text NOT NULL,
        format integer NOT NULL,
        data text NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    "CREATE UNIQUE INDEX hookloop_messages_id ON hookloop_messages (session_id, message_id)",
    # One append in one round trip (a statement is a transaction of its own). Returns
    # ('ok', seq), ('duplicate', seq) for a message id the session has with the same data,
    # ('id_taken', seq) for one it has with other data, ('conflict', last_seq) when the
    # session is not at p_expected. Nothing is written unless the status is 'ok'.
    """CREATE FUNCTION hookloop_append(
        p_session text, p_message text, p_format integer, p_data text,
        p_expected bigint, p_now timestamptz, p_keep bigint
    ) RETURNS TABLE (out_status text, out_seq bigint) LANGUAGE plpgsql AS $fn$
    DECLARE
        v_seq bigint;
        v_data text;
        v_removed bigint;
    BEGIN
        SELECT m.seq, m.data INTO v_seq, v_data FROM hookloop_messages m
            WHERE m.session_id = p_session AND m.message_id = p_message;
        IF FOUND THEN
            RETURN QUERY SELECT
                CASE WHEN v_data = p_data THEN 'duplicate' ELSE 'id_taken' END, v_seq;
            RETURN;
        END IF;
        LOOP
            UPDATE hookloop_sessions s SET last_seq = s.last_seq + 1,
                    message_count = s.message_count + 1, updated_at = p_now
                WHERE s.session_id = p_session AND (p_expected IS NULL OR s.last_seq = p_expected)
                RETURNING s.last_seq INTO v_seq;
            EXIT WHEN FOUND;
            SELECT s.last_seq INTO v_seq FROM hookloop_sessions s WHERE s.session_id = p_session;
            IF FOUND OR coalesce(p_expected, 0) <> 0 THEN
                RETURN QUERY SELECT 'conflict'::text, coalesce(v_seq, 0::bigint);
                RETURN;
            END IF;
            INSERT INTO hookloop_sessions VALUES (p_session, NULL, p_now, p_now, 1, 1)
                ON CONFLICT (session_id) DO NOTHING;
            IF FOUND THEN
                v_seq := 1;
                EXIT;
            END IF;
            -- Another writer created the session meanwhile; its row is visible now.
        END LOOP;
        INSERT INTO hookloop_messages VALUES (p_session, v_seq, p_message, p_format, p_data);
        IF p_keep IS NOT NULL AND v_seq > p_keep THEN
            DELETE FROM hookloop_messages m
                WHERE m.session_id = p_session AND m.seq <= v_seq - p_keep;
            GET DIAGNOSTICS v_removed = ROW_COUNT;
            IF v_removed > 0 THEN
                UPDATE hookloop_sessions s SET message_count = s.message_count - v_removed
                    WHERE s.session_id = p_session;
            END IF;
        END IF;
        RETURN QUERY SELECT 'ok'::text, v_seq;
    END
    $fn$""",
]

APPEND = "SELECT * FROM hookloop_append($1, $2, $3, $4, $5, $6, $7)"

INFO_COLUMNS = "session_id, parent_id, created_at, updated_at, message_count, last_seq"
