CREATE TABLE `held_results` (
	`call_id` text PRIMARY KEY NOT NULL,
	`result` text NOT NULL,
	`kept_until` text NOT NULL
);
--> statement-breakpoint
CREATE INDEX `held_results_kept_idx` ON `held_results` (`kept_until`);--> statement-breakpoint
CREATE TABLE `linked_uris` (
	`key` text PRIMARY KEY NOT NULL,
	`server` text NOT NULL,
	`linked_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL
);
--> statement-breakpoint
CREATE INDEX `linked_uris_server_idx` ON `linked_uris` (`server`,`linked_at`);--> statement-breakpoint
CREATE TABLE `mcp_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`token_id` integer NOT NULL,
	`protocol_version` text NOT NULL,
	`client` text NOT NULL,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL,
	`last_active_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL,
	FOREIGN KEY (`token_id`) REFERENCES `agent_tokens`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `mcp_sessions_token_idx` ON `mcp_sessions` (`token_id`);--> statement-breakpoint
CREATE TABLE `replicas` (
	`id` text PRIMARY KEY NOT NULL,
	`address` text,
	`label` text NOT NULL,
	`started_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL,
	`heartbeat_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL
);
--> statement-breakpoint
CREATE TABLE `server_holders` (
	`server` text PRIMARY KEY NOT NULL,
	`replica` text NOT NULL,
	`since` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL
);
--> statement-breakpoint
CREATE TABLE `sign_in_counters` (
	`key` text PRIMARY KEY NOT NULL,
	`since` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE `calls` ADD `replica` text;--> statement-breakpoint
CREATE INDEX `calls_replica_idx` ON `calls` (`replica`);--> statement-breakpoint
ALTER TABLE `notification_deliveries` ADD `claimed_by` text;