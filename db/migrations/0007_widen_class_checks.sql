ALTER TABLE "dead_letter" DROP CONSTRAINT "dead_letter_reason_class_check";--> statement-breakpoint
ALTER TABLE "ingress_security_event" DROP CONSTRAINT "ingress_security_event_failure_class_check";--> statement-breakpoint
ALTER TABLE "dead_letter" ADD CONSTRAINT "dead_letter_reason_class_check" CHECK (reason_class ~ '^[a-z][a-z0-9_.:-]{0,127}$');--> statement-breakpoint
ALTER TABLE "ingress_security_event" ADD CONSTRAINT "ingress_security_event_failure_class_check" CHECK (failure_class ~ '^[a-z][a-z0-9_.:-]{0,127}$');