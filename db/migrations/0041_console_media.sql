-- Hand-written (console media in): a console message may now carry attachments (the API stores them
-- as artifacts, api/admin/console-media.ts), so a console binding's recorded capabilities list
-- media_in like the other channels', under capability version 2 (channels/capabilities.ts). The
-- other channels' capabilities keep their values and move to version 2 with them.
-- IDEMPOTENT: only rows still at version 1 change.
UPDATE public.channel_binding
SET capabilities = CASE
        WHEN channel = 'console'
        THEN jsonb_set(capabilities, '{media_in}', '["image", "audio", "video", "file"]'::jsonb)
        ELSE capabilities
    END,
    capability_version = 2
WHERE capability_version = 1;
