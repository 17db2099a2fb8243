import { Unprocessable } from '../errors.ts';
import {
  REPORT_LANGUAGES,
  REPORT_TEMPLATES,
  type ReportLanguage,
  type ReportTemplate,
} from './report-input.ts';

/**
 * A report's template and language, checked the same way wherever a report is asked for (a request,
 * a schedule): 422 `unknown_template` or `unknown_language` naming the accepted values.
 */
export function checkTemplateAndLanguage(
  template: string,
  language: string,
): { template: ReportTemplate; language: ReportLanguage } {
  if (!(REPORT_TEMPLATES as readonly string[]).includes(template)) {
    throw new Unprocessable('unknown_template', `template must be one of ${REPORT_TEMPLATES.join(', ')}`, [
      { path: 'template', message: 'unknown template' },
    ]);
  }
  if (!(REPORT_LANGUAGES as readonly string[]).includes(language)) {
    throw new Unprocessable('unknown_language', `language must be one of ${REPORT_LANGUAGES.join(', ')}`, [
      { path: 'language', message: 'unknown language' },
    ]);
  }
  return { template: template as ReportTemplate, language: language as ReportLanguage };
}
