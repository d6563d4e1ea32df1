CREATE TABLE `notification_deliveries` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`delivery_id` text NOT NULL,
	`channel` text NOT NULL,
	`target` text NOT NULL,
	`event` text NOT NULL,
	`call_id` text,
	`payload` text NOT NULL,
	`status` text NOT NULL,
	`attempts` integer DEFAULT 0 NOT NULL,
	`next_attempt_at` text NOT NULL,
	`deadline` text,
	`last_status` integer,
	`last_error` text,
	`created_at` text DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')) NOT NULL,
	`finished_at` text
);
--> statement-breakpoint
CREATE UNIQUE INDEX `notification_deliveries_delivery_id_unique` ON `notification_deliveries` (`delivery_id`);--> statement-breakpoint
CREATE INDEX `notification_due_idx` ON `notification_deliveries` (`status`,`next_attempt_at`);--> statement-breakpoint
CREATE INDEX `notification_target_idx` ON `notification_deliveries` (`channel`,`target`,`id`);--> statement-breakpoint
ALTER TABLE `users` ADD `email` text;