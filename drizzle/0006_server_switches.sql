CREATE TABLE `server_switches` (
	`name` text PRIMARY KEY NOT NULL,
	`switched_by` text NOT NULL,
	`switched_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL
);
--> statement-breakpoint
ALTER TABLE `over_cap_tools` ADD `max_tools` integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE `over_cap_tools` ADD `entry_at` text;--> statement-breakpoint
ALTER TABLE `tools` ADD `excluded` integer DEFAULT false NOT NULL;