ALTER TABLE "channel_binding" DROP CONSTRAINT "channel_binding_channel_check";--> statement-breakpoint
ALTER TABLE "ingress_security_event" DROP CONSTRAINT "ingress_security_event_channel_check";--> statement-breakpoint
ALTER TABLE "reply_outbox" DROP CONSTRAINT "reply_outbox_channel_check";--> statement-breakpoint
ALTER TABLE "channel_binding" ALTER COLUMN "secret_ref" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "channel_binding_secret_ref_check" CHECK ((channel = 'console') = (secret_ref IS NULL));--> statement-breakpoint
ALTER TABLE "channel_binding" ADD CONSTRAINT "channel_binding_channel_check" CHECK (channel IN ('telegram', 'wecom', 'console'));--> statement-breakpoint
ALTER TABLE "ingress_security_event" ADD CONSTRAINT "ingress_security_event_channel_check" CHECK (channel IN ('telegram', 'wecom', 'console'));--> statement-breakpoint
ALTER TABLE "reply_outbox" ADD CONSTRAINT "reply_outbox_channel_check" CHECK (channel IN ('telegram', 'wecom', 'console'));