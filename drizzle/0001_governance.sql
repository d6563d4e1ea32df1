CREATE TABLE `catalogue_changes` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL,
	`server` text NOT NULL,
	`kind` text NOT NULL,
	`tool` text NOT NULL,
	`local_name` text,
	`detail` text
);
--> statement-breakpoint
CREATE INDEX `changes_server_idx` ON `catalogue_changes` (`server`);--> statement-breakpoint
CREATE INDEX `changes_local_idx` ON `catalogue_changes` (`local_name`);--> statement-breakpoint
CREATE TABLE `change_reads` (
	`user_id` integer PRIMARY KEY NOT NULL,
	`last_seen_id` integer NOT NULL,
	FOREIGN KEY (`user_id`) REFERENCES `users`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
ALTER TABLE `calls` ADD `approval_reason` text;--> statement-breakpoint
CREATE INDEX `calls_requester_idx` ON `calls` (`requester_name`);--> statement-breakpoint
CREATE INDEX `calls_tool_idx` ON `calls` (`tool`);--> statement-breakpoint
ALTER TABLE `tools` ADD `pinned_definition` text;--> statement-breakpoint
ALTER TABLE `tools` ADD `vouched_hash` text;--> statement-breakpoint
ALTER TABLE `tools` ADD `vouched_by` text;--> statement-breakpoint
ALTER TABLE `tools` ADD `vouched_at` text;--> statement-breakpoint
ALTER TABLE `tools` ADD `always_confirm` integer DEFAULT false NOT NULL;