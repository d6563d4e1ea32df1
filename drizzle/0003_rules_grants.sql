CREATE TABLE `grants` (
	`id` text PRIMARY KEY NOT NULL,
	`requester_kind` text NOT NULL,
	`requester_name` text NOT NULL,
	`tool` text NOT NULL,
	`definition_hash` text NOT NULL,
	`scope` text NOT NULL,
	`arguments_digest` text,
	`call_id` text NOT NULL,
	`created_by` text NOT NULL,
	`made_as` text NOT NULL,
	`created_at` text NOT NULL,
	`expires_at` text NOT NULL,
	`uses_allowed` integer,
	`uses` integer DEFAULT 0 NOT NULL,
	`last_used_at` text,
	`ended_at` text,
	`end_reason` text
);
--> statement-breakpoint
CREATE INDEX `grants_cover_idx` ON `grants` (`tool`,`requester_name`);--> statement-breakpoint
CREATE INDEX `grants_created_idx` ON `grants` (`created_at`);--> statement-breakpoint
ALTER TABLE `calls` ADD `rule` text;--> statement-breakpoint
ALTER TABLE `calls` ADD `grant_id` text;--> statement-breakpoint
ALTER TABLE `calls` ADD `approvals_needed` integer DEFAULT 1 NOT NULL;--> statement-breakpoint
ALTER TABLE `calls` ADD `approved_by` text DEFAULT '[]' NOT NULL;--> statement-breakpoint
CREATE INDEX `calls_rule_idx` ON `calls` (`rule`);